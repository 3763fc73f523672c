"""The plots of one run (``plots/`` in its output folder), drawn from its per-round records: the
accuracy plots carry the scenario's target accuracy as a dotted line, and one plot shows the traffic
in both directions (accuracy vs bytes up + down, beside the uploads alone)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fedgc.reports.plots.style import (
    WIDE_FIGSIZE,
    bytes_unit,
    decorate,
    headroom,
    integer_ticks,
    marker_size,
    new_axes,
    new_figure,
    save,
    say_no_data,
    time_unit,
)
from fedgc.runs.metrics import RoundRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes

RUN_PLOT_FILES = ("accuracy_vs_time.png", "accuracy_vs_upload.png", "accuracy_vs_total_bytes.png",
                  "round_duration.png", "participation.png", "upload_bytes.png", "upload_time.png")

PARTICIPATION_COLORS = {"completed": "tab:green", "late": "tab:orange", "discarded": "tab:olive", "cut": "tab:red",
                        "failed": "0.35"}
OPTIONAL_STATUSES = ("discarded", "failed")  # drawn only in runs where some client was


@dataclass(frozen=True)
class AccuracyPoint:
    """An evaluated round: when it ended, how much had been uploaded by then, the accuracy."""

    round: int
    sim_time_s: float
    uploaded_bytes: int
    accuracy: float
    total_bytes: int = 0  # uploaded and downloaded


def accuracy_points(rows: list[RoundRecord]) -> list[AccuracyPoint]:
    """The evaluated rounds; a NaN or infinite accuracy or end time (a hand-edited or forged
    ``metrics.jsonl``: fedgc writes them as null) is no point on a curve and is left out."""
    points, uploaded, total = [], 0, 0
    for r in rows:
        uploaded += r.bytes_up
        total += r.bytes_up + r.bytes_down
        if r.accuracy is not None and math.isfinite(r.accuracy) and math.isfinite(r.sim_end_s):
            points.append(AccuracyPoint(r.round, r.sim_end_s, uploaded, r.accuracy, total))
    return points


def _mean_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def merge_attempts(rows: list[RoundRecord]) -> list[RoundRecord]:
    """One record per round number: a retried round's attempts (``strategy.too_few: retry``) add up
    (durations, client counts, uploads); phase means are averaged over the attempts."""
    by_round: dict[int, list[RoundRecord]] = {}
    for r in rows:
        by_round.setdefault(r.round, []).append(r)
    merged = []
    for number, attempts in by_round.items():
        record = RoundRecord(round=number, round_duration_s=sum(a.round_duration_s for a in attempts))
        for status in PARTICIPATION_COLORS:
            setattr(record, status, sum(getattr(a, status) for a in attempts))
        for phase in ("mean_download_s", "mean_compute_s", "mean_upload_s"):
            setattr(record, phase, _mean_or_none([getattr(a, phase) for a in attempts]))
        record.client_upload_bytes = [b for a in attempts for b in a.client_upload_bytes]
        record.client_upload_s = [t for a in attempts for t in a.client_upload_s]
        merged.append(record)
    return merged


def _scenario_target(out_dir: Path) -> float | None:
    """``eval.target_accuracy`` of the run's ``scenario.yaml`` (next to ``plots/``), if it can be read."""
    from fedgc.bounded import SCENARIO_MAX_BYTES, read_text
    from fedgc.scenario import yaml12

    try:
        tree = yaml12.safe_load(read_text(out_dir.parent / "scenario.yaml", "scenario", SCENARIO_MAX_BYTES))
        target = tree["eval"]["target_accuracy"]
    except Exception:  # noqa: BLE001 - no scenario next to the plots, or not a readable one: no target line
        return None
    return float(target) if isinstance(target, (int, float)) and 0 < target <= 1 else None


def plot_run(rows: list[RoundRecord], out_dir: Path, title: str, target_accuracy: float | None = None) -> list[Path]:
    """Write every per-run plot (``RUN_PLOT_FILES``) into ``out_dir``; returns the paths written.
    ``target_accuracy``: the dotted target line (default: from the run's ``scenario.yaml`` beside ``out_dir``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = target_accuracy if target_accuracy is not None else _scenario_target(out_dir)
    points = accuracy_points(rows)
    rounds = merge_attempts(rows)
    return [
        _accuracy_vs_time(points, title, out_dir / "accuracy_vs_time.png", target),
        _accuracy_vs_upload(points, title, out_dir / "accuracy_vs_upload.png", target),
        _accuracy_vs_total_bytes(points, title, out_dir / "accuracy_vs_total_bytes.png", target),
        _round_duration(rounds, title, out_dir / "round_duration.png"),
        _participation(rounds, title, out_dir / "participation.png"),
        _distribution({r.round: r.client_upload_bytes for r in rounds}, "bytes", title, out_dir / "upload_bytes.png"),
        _distribution({r.round: r.client_upload_s for r in rounds}, "seconds", title, out_dir / "upload_time.png"),
    ]


def _accuracy_vs_time(points: list[AccuracyPoint], title: str, path: Path, target: float | None) -> Path:
    unit = time_unit(max((p.sim_time_s for p in points), default=0.0))
    fig, ax = new_axes(f"{title}: accuracy vs simulated time", f"simulated time ({unit.name})", "test accuracy (%)")
    _accuracy_line(ax, [p.sim_time_s / unit.scale for p in points], points, title, target)
    return save(fig, path)


def _accuracy_vs_upload(points: list[AccuracyPoint], title: str, path: Path, target: float | None) -> Path:
    unit = bytes_unit(max((p.uploaded_bytes for p in points), default=0))
    fig, ax = new_axes(f"{title}: accuracy vs uploaded bytes", f"uploaded, all clients, cumulative ({unit.name})",
                       "test accuracy (%)")
    _accuracy_line(ax, [p.uploaded_bytes / unit.scale for p in points], points, title, target)
    return save(fig, path)


def _accuracy_vs_total_bytes(points: list[AccuracyPoint], title: str, path: Path, target: float | None) -> Path:
    """Accuracy against all the traffic (uploads + downloads), with the uploads alone for scale."""
    unit = bytes_unit(max((p.total_bytes for p in points), default=0))
    fig, ax = new_axes(f"{title}: accuracy vs bytes up + down", f"sent and received, all clients, cumulative "
                       f"({unit.name})", "test accuracy (%)")
    _accuracy_line(ax, [p.total_bytes / unit.scale for p in points], points, "up + down", target)
    if points:
        ax.plot([p.uploaded_bytes / unit.scale for p in points], [p.accuracy * 100 for p in points], linestyle="--",
                marker="o", markersize=marker_size(len(points)) * 0.6, color="0.55", label="up only")
        ax.legend(loc="lower right")
    return save(fig, path)


def _accuracy_line(ax: Axes, xs: list[float], points: list[AccuracyPoint], label: str,
                   target: float | None = None) -> None:
    if not points:
        say_no_data(ax, "no evaluated rounds")
        return
    ax.plot(xs, [p.accuracy * 100 for p in points], marker="o", markersize=marker_size(len(points)), label=label)
    if target is not None:
        ax.axhline(target * 100, color="0.3", linestyle=":", linewidth=1, label=f"target {target * 100:g}%")
    ax.set_xlim(left=0)
    ax.legend(loc="lower right")


def _round_duration(rows: list[RoundRecord], title: str, path: Path) -> Path:
    unit = time_unit(max((r.round_duration_s for r in rows), default=0.0))
    fig, ax = new_axes(f"{title}: round duration", "round", f"simulated time ({unit.name})")
    if not rows:
        say_no_data(ax, "no rounds")
        return save(fig, path)
    rounds = [r.round for r in rows]
    ax.bar(rounds, [r.round_duration_s / unit.scale for r in rows], width=0.8, color="0.75",
           label="round duration (last kept update or deadline)")
    phases = (("mean_download_s", "mean client download"), ("mean_compute_s", "mean client compute"),
              ("mean_upload_s", "mean client upload"))
    for key, label in phases:
        values = [getattr(r, key) for r in rows]
        ys = [np.nan if v is None else v / unit.scale for v in values]
        ax.plot(rounds, ys, marker="o", markersize=marker_size(len(rows)), linewidth=1.2, label=label)
    integer_ticks(ax.xaxis)
    headroom(ax, max(r.round_duration_s for r in rows) / unit.scale, factor=1.5)
    ax.legend(loc="upper center", ncol=2, fontsize=8)
    return save(fig, path)


def _participation(rows: list[RoundRecord], title: str, path: Path) -> Path:
    fig, ax = new_axes(f"{title}: participation per round", "round", "selected clients")
    if not rows:
        say_no_data(ax, "no rounds")
        return save(fig, path)
    rounds = np.array([r.round for r in rows])
    bottom = np.zeros(len(rows))
    for status, color in PARTICIPATION_COLORS.items():
        counts = np.array([getattr(r, status) for r in rows], dtype=float)
        if status in OPTIONAL_STATUSES and not counts.any():
            continue  # only shown when over-selection discarded a client / a client actually failed
        ax.bar(rounds, counts, bottom=bottom, width=0.8, color=color, label=status, linewidth=0)
        bottom += counts
    integer_ticks(ax.xaxis)
    integer_ticks(ax.yaxis)
    headroom(ax, bottom.max(), factor=1.25)
    ax.legend(loc="upper center", ncol=5, fontsize=8)
    return save(fig, path)


def _distribution(per_round: Mapping[int, Sequence[float]], kind: str, title: str, path: Path) -> Path:
    """Left: histogram of every completed client's upload over the run. Right: per round, median and range."""
    values = [v for round_values in per_round.values() for v in round_values]
    unit = (bytes_unit if kind == "bytes" else time_unit)(max(values, default=0.0))
    what = "upload size" if kind == "bytes" else "upload time"
    value_label = f"{what} per client ({unit.name})"
    fig = new_figure(WIDE_FIGSIZE)
    hist_ax, round_ax = fig.subplots(1, 2)
    decorate(hist_ax, f"{title}: {what} of every completed upload", value_label, "uploads")
    decorate(round_ax, f"{title}: {what} per round", "round", value_label)
    if not values:
        say_no_data(hist_ax, "no completed uploads")
        say_no_data(round_ax, "no completed uploads")
        return save(fig, path)
    scaled = np.array(values, dtype=float) / unit.scale
    low, high = float(scaled.min()), float(scaled.max())
    if high - low <= 1e-9 * max(abs(high), 1.0):  # every upload the same: one bar, centred
        low, high = low - max(abs(low) * 0.05, 1e-3), high + max(abs(high) * 0.05, 1e-3)
    hist_ax.hist(scaled, bins=min(30, max(5, len(values) // 3)), range=(low, high), color="tab:blue", alpha=0.8,
                 label=f"{len(values)} uploads")
    hist_ax.axvline(float(np.median(scaled)), color="black", linestyle="--", linewidth=1,
                    label=f"median {np.median(scaled):.3g} {unit.name}")
    integer_ticks(hist_ax.yaxis)
    hist_ax.legend(loc="upper right", fontsize=8)
    kept = [(n, np.array(v, dtype=float) / unit.scale) for n, v in per_round.items() if v]
    rounds = [k for k, _ in kept]
    round_ax.fill_between(rounds, [v.min() for _, v in kept], [v.max() for _, v in kept], color="tab:blue",
                          alpha=0.2, step="mid", label="min–max over clients")
    round_ax.plot(rounds, [float(np.median(v)) for _, v in kept], color="tab:blue", marker="o",
                  markersize=marker_size(len(kept)), label="median over clients")
    integer_ticks(round_ax.xaxis)
    headroom(round_ax, float(scaled.max()), factor=1.3)
    round_ax.legend(loc="upper center", ncol=2, fontsize=8)
    return save(fig, path)
