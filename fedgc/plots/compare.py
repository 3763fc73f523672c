"""Overlays comparing runs (``python -m fedgc.report --out DIR``): accuracy vs simulated time and vs
uploaded bytes, one line per run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fedgc.plots.run import AccuracyPoint
from fedgc.plots.style import FIGSIZE, bytes_unit, marker_size, new_axes, save, say_no_data, time_unit

COMPARE_PLOT_FILES = ("compare_accuracy_vs_time.png", "compare_accuracy_vs_upload.png")


@dataclass(frozen=True)
class RunSeries:
    """One run's line on the overlays."""

    label: str
    points: list[AccuracyPoint]
    target_accuracy: float | None = None


def plot_comparison(runs: list[RunSeries], out_dir: Path) -> list[Path]:
    """Write ``COMPARE_PLOT_FILES`` into ``out_dir``; returns the paths written."""
    every_point = [p for run in runs for p in run.points]
    t_unit = time_unit(max((p.sim_time_s for p in every_point), default=0.0))
    b_unit = bytes_unit(max((p.uploaded_bytes for p in every_point), default=0))
    return [
        _overlay(runs, lambda p: p.sim_time_s / t_unit.scale, "accuracy vs simulated time",
                 f"simulated time ({t_unit.name})", out_dir / COMPARE_PLOT_FILES[0]),
        _overlay(runs, lambda p: p.uploaded_bytes / b_unit.scale, "accuracy vs uploaded bytes",
                 f"uploaded, all clients, cumulative ({b_unit.name})", out_dir / COMPARE_PLOT_FILES[1]),
    ]


def _overlay(runs: list[RunSeries], x_of, title: str, xlabel: str, path: Path) -> Path:
    width, height = FIGSIZE
    fig, ax = new_axes(f"{len(runs)} runs: {title}", xlabel, "test accuracy (%)",
                       figsize=(width, height + 0.22 * (len(runs) + 1)))  # the legend sits below the axes
    if not any(run.points for run in runs):
        say_no_data(ax, "no evaluated rounds")
        return save(fig, path)
    for run in runs:
        xs = [x_of(p) for p in run.points]
        ax.plot(xs, [p.accuracy * 100 for p in run.points], marker="o", markersize=marker_size(len(xs)),
                linewidth=1.4, label=run.label)
    targets = {run.target_accuracy for run in runs if run.target_accuracy is not None}
    if len(targets) == 1:
        target = targets.pop()
        ax.axhline(target * 100, color="0.3", linestyle=":", linewidth=1, label=f"target {target * 100:g}%")
    ax.set_xlim(left=0)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8, frameon=False)
    return save(fig, path, legend_outside=True)
