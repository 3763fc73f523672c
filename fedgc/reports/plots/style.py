"""Shared figure conventions: figures without pyplot, one figure size, units that fit the numbers shown."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedgc.bounded import writing

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.legend import Legend

# Figures are built with matplotlib's object API (no pyplot): saving a PNG needs no backend, and a
# notebook's or application's own matplotlib backend and open figures are left alone.
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


def new_figure(figsize: tuple[float, float] = FIGSIZE) -> Figure:
    return Figure(figsize=figsize, dpi=DPI)


def new_axes(title: str, xlabel: str, ylabel: str, figsize: tuple[float, float] = FIGSIZE) -> tuple[Figure, Axes]:
    fig = new_figure(figsize)
    ax = fig.subplots()
    decorate(ax, title, xlabel, ylabel)
    return fig, ax


def decorate(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def say_no_data(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def save(fig: Figure, path: Path, *, legend_outside: bool = False) -> Path:
    """Fixed margins (fit for these labels; a layout engine would double the drawing time), or a tight
    bounding box when the legend sits outside the axes. The PNG carries its axes' titles (``Title``)
    and its legends' labels (``Description``, ``; ``-separated) as text, for whoever reads it by program."""
    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 0.35 / height,
                        wspace=0.22)
    with writing(path):
        fig.savefig(path, bbox_inches="tight" if legend_outside else None, metadata=_text_of(fig))
    return path


def _text_of(fig: Figure) -> dict[str, str]:
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    # cast: the second get_legend() is the legend the first found not None (mypy cannot know a call repeats)
    labels = [text.get_text() for ax in fig.axes if ax.get_legend() is not None
              for text in cast("Legend", ax.get_legend()).get_texts()]
    return {"Title": " / ".join(titles), "Description": "; ".join(labels)}


def integer_ticks(axis: Axis) -> None:
    """Whole-number ticks (rounds, client counts)."""
    axis.set_major_locator(MaxNLocator(integer=True))


def headroom(ax: Axes, top: float, factor: float = 1.4) -> None:
    """Start the y axis at 0 and leave room above the data for a legend."""
    ax.set_ylim(0, (top if top > 0 else 1.0) * factor)


def marker_size(points: int) -> float:
    """Markers on short series only; a long series reads better as a plain line."""
    return 3.0 if points <= 60 else 0.0
