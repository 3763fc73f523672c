"""Overlays comparing runs (``python -m fedgc report --out DIR``): accuracy vs simulated time and vs
uploaded bytes (a log axis: compressed and dense uploads differ by orders of magnitude), one line per
run; a group of seeds is its mean line with a ±std band (sample std)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fedgc.reports.plots.run import AccuracyPoint
from fedgc.reports.plots.style import FIGSIZE, bytes_unit, marker_size, new_axes, save, say_no_data, time_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COMPARE_PLOT_FILES = ("compare_accuracy_vs_time.png", "compare_accuracy_vs_upload.png")
# ``fedgc run --baseline``: the variants against simulated time and against every byte sent and received
# (the downloads are most of a compressed run's bytes: the upload axis alone would hide them).
BASELINE_PLOT_FILES = ("compare_accuracy_vs_time.png", "compare_accuracy_vs_total_bytes.png")


@dataclass(frozen=True)
class RunSeries:
    """One run's line on the overlays."""

    label: str
    points: list[AccuracyPoint]
    target_accuracy: float | None = None
    accuracy_std: list[float] | None = None  # a group of seeds: the band around the mean points
    runs: int = 1  # how many runs the line stands for


def mean_series(label: str, runs: list[list[AccuracyPoint]], target_accuracy: float | None = None) -> RunSeries:
    """One run as it is; several (seeds): per round evaluated in every run, the mean time, upload and
    accuracy, and the accuracy's sample std (n - 1) for the band."""
    if len(runs) == 1:
        return RunSeries(label, runs[0], target_accuracy)
    by_round = [{p.round: p for p in points} for points in runs]
    common = sorted(set.intersection(*(set(r) for r in by_round)))
    points, stds = [], []
    for number in common:
        group = [r[number] for r in by_round]
        accuracy = sum(p.accuracy for p in group) / len(group)
        points.append(AccuracyPoint(number, sum(p.sim_time_s for p in group) / len(group),
                                    round(sum(p.uploaded_bytes for p in group) / len(group)), accuracy,
                                    round(sum(p.total_bytes for p in group) / len(group))))
        stds.append(math.sqrt(sum((p.accuracy - accuracy) ** 2 for p in group) / (len(group) - 1)))
    return RunSeries(f"{label} (mean ± std, n={len(runs)})", points, target_accuracy, stds, len(runs))


def plot_comparison(runs: list[RunSeries], out_dir: Path) -> list[Path]:
    """Write ``COMPARE_PLOT_FILES`` into ``out_dir``; returns the paths written."""
    every_point = [p for run in runs for p in run.points]
    t_unit = time_unit(max((p.sim_time_s for p in every_point), default=0.0))
    b_unit = bytes_unit(max((p.uploaded_bytes for p in every_point), default=0))
    return [
        _overlay(runs, lambda p: p.sim_time_s / t_unit.scale, "accuracy vs simulated time",
                 f"simulated time ({t_unit.name})", out_dir / COMPARE_PLOT_FILES[0]),
        _overlay(runs, lambda p: p.uploaded_bytes / b_unit.scale, "accuracy vs uploaded bytes",
                 f"uploaded, all clients, cumulative ({b_unit.name}, log scale)", out_dir / COMPARE_PLOT_FILES[1],
                 log_x=True),
    ]


def plot_baseline(runs: list[RunSeries], out_dir: Path, name: str) -> list[Path]:
    """Write ``BASELINE_PLOT_FILES`` into ``out_dir``: one line per variant (its label), titled with the
    scenario's ``name``; returns the paths written."""
    every_point = [p for run in runs for p in run.points]
    t_unit = time_unit(max((p.sim_time_s for p in every_point), default=0.0))
    b_unit = bytes_unit(max((p.total_bytes for p in every_point), default=0))
    return [
        _overlay(runs, lambda p: p.sim_time_s / t_unit.scale, f"{name}: accuracy vs simulated time",
                 f"simulated time ({t_unit.name})", out_dir / BASELINE_PLOT_FILES[0]),
        _overlay(runs, lambda p: p.total_bytes / b_unit.scale, f"{name}: accuracy vs bytes up + down",
                 f"sent and received, all clients, cumulative ({b_unit.name})", out_dir / BASELINE_PLOT_FILES[1]),
    ]


def _overlay(runs: list[RunSeries], x_of: Callable[[AccuracyPoint], float], title: str, xlabel: str, path: Path,
             log_x: bool = False) -> Path:
    fig = overlay_figure(runs, x_of, title, xlabel, log_x)
    return save(fig, path, legend_outside=any(run.points for run in runs))


def counted(runs: list[RunSeries]) -> str:
    """``3 runs``; ``2 lines, 5 runs`` when groups of seeds are drawn as one line each."""
    total = sum(run.runs for run in runs)

    def plural(n: int, word: str) -> str:
        return f"{n} {word}" + ("s" if n != 1 else "")

    return plural(total, "run") if total == len(runs) else f"{plural(len(runs), 'line')}, {plural(total, 'run')}"


def overlay_figure(runs: list[RunSeries], x_of: Callable[[AccuracyPoint], float], title: str, xlabel: str,
                   log_x: bool = False) -> Figure:
    """The overlay as a matplotlib figure, not yet saved (``log_x``: a log x axis, points at 0 left out)."""
    width, height = FIGSIZE
    fig, ax = new_axes(f"{title} ({counted(runs)})", xlabel, "test accuracy (%)",
                       figsize=(width, height + 0.22 * (len(runs) + 1)))  # the legend sits below the axes
    if not any(run.points for run in runs):
        say_no_data(ax, "no evaluated rounds")
        return fig
    for run in runs:
        stds = run.accuracy_std or [0.0] * len(run.points)
        kept = [(x_of(p), p.accuracy * 100, sd * 100) for p, sd in zip(run.points, stds) if not log_x or x_of(p) > 0]
        xs, ys = [k[0] for k in kept], [k[1] for k in kept]
        (line,) = ax.plot(xs, ys, marker="o", markersize=marker_size(len(xs)), linewidth=1.4, label=run.label)
        if run.accuracy_std is not None:
            ax.fill_between(xs, [y - sd for _, y, sd in kept], [y + sd for _, y, sd in kept], color=line.get_color(),
                            alpha=0.2, linewidth=0)
    targets = {run.target_accuracy for run in runs if run.target_accuracy is not None}
    if len(targets) == 1:
        target = targets.pop()
        ax.axhline(target * 100, color="0.3", linestyle=":", linewidth=1, label=f"target {target * 100:g}%")
    if log_x and any(x_of(p) > 0 for run in runs for p in run.points):
        ax.set_xscale("log")
    else:
        ax.set_xlim(left=0)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8, frameon=False)
    return fig
