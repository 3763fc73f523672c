"""Shared figure conventions: the Agg backend, one figure size, units that fit the numbers shown."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

FIGSIZE = (6.4, 4.0)
WIDE_FIGSIZE = (10.0, 4.0)
DPI = 110


@dataclass(frozen=True)
class Unit:
    """Divide raw values by ``scale`` to show them in ``name``."""

    name: str
    scale: float


def time_unit(largest_s: float) -> Unit:
    """Seconds, minutes or hours, whichever keeps the largest value readable."""
    if largest_s >= 3 * 3600:
        return Unit("h", 3600.0)
    if largest_s >= 3 * 60:
        return Unit("min", 60.0)
    return Unit("s", 1.0)


def bytes_unit(largest_bytes: float) -> Unit:
    """B, kB or MB (decimal, like the rest of fedgc's outputs)."""
    if largest_bytes >= 1e6:
        return Unit("MB", 1e6)
    if largest_bytes >= 1e3:
        return Unit("kB", 1e3)
    return Unit("B", 1.0)


def new_axes(title: str, xlabel: str, ylabel: str, figsize=FIGSIZE):
    fig, ax = plt.subplots(figsize=figsize, dpi=DPI)
    decorate(ax, title, xlabel, ylabel)
    return fig, ax


def decorate(ax, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def say_no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def save(fig, path: Path, *, legend_outside: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight" if legend_outside else None)
    plt.close(fig)
    return path


def integer_ticks(axis) -> None:
    """Whole-number ticks (rounds, client counts)."""
    axis.set_major_locator(MaxNLocator(integer=True))


def headroom(ax, top: float, factor: float = 1.4) -> None:
    """Start the y axis at 0 and leave room above the data for a legend."""
    ax.set_ylim(0, (top if top > 0 else 1.0) * factor)


def marker_size(points: int) -> float:
    """Markers on short series only; a long series reads better as a plain line."""
    return 3.0 if points <= 60 else 0.0
