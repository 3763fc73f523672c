"""Per-run plots (matplotlib, Agg backend): accuracy vs simulated time and vs uploaded MB."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from fedgc.metrics import RoundRecord


def _accuracy_series(rows: list[RoundRecord]):
    points, cum_up = [], 0
    for r in rows:
        cum_up += r.bytes_up
        if r.accuracy is not None:
            points.append((r.sim_end_s, cum_up / 1e6, r.accuracy * 100))
    return points


def plot_run(rows: list[RoundRecord], out_dir: Path, title: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    points = _accuracy_series(rows)
    written = []
    for filename, column, xlabel in (("accuracy_vs_time.png", 0, "simulated time (s)"),
                                     ("accuracy_vs_upload.png", 1, "uploaded (MB, all clients)")):
        fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
        ax.plot([p[column] for p in points], [p[2] for p in points], marker="o", markersize=3, label=title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{title}: accuracy vs {xlabel.split(' (')[0]}")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(out_dir / filename)
        plt.close(fig)
        written.append(out_dir / filename)
    return written
