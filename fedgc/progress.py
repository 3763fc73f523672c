"""The progress line during a run: round, simulated time, accuracy, MB uploaded, participation.

A tqdm bar on an interactive terminal; silent when stderr is not a terminal or with ``--quiet``.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

from fedgc.metrics import RoundRecord


class Progress:
    def __init__(self, rounds: int, enabled: bool = True) -> None:
        self.bar = None
        self.last_accuracy: float | None = None
        if enabled and sys.stderr.isatty():
            self.bar = tqdm(total=rounds, unit="round", dynamic_ncols=True, file=sys.stderr)

    def update(self, record: RoundRecord, total_bytes_up: int) -> None:
        if record.accuracy is not None:
            self.last_accuracy = record.accuracy
        if self.bar is None:
            return
        acc = f"{self.last_accuracy:.3f}" if self.last_accuracy is not None else "-"
        self.bar.set_postfix_str(
            f"sim {record.sim_end_s:,.0f}s acc {acc} up {total_bytes_up / 1e6:.2f}MB "
            f"ok {record.completed} cut {record.cut} late {record.late}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
