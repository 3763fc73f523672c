"""The progress line during a run: round, simulated time, accuracy, MB up/down, participation.

A tqdm bar on an interactive terminal; silent when stderr is not a terminal or with ``--quiet``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tqdm import tqdm

from fedgc.metrics import RoundRecord


@dataclass
class RunSoFar:
    """What the progress line shows after a round: running totals and the latest figures."""

    bytes_up: int = 0
    bytes_down: int = 0
    last_accuracy: float | None = None

    def add(self, record: RoundRecord) -> None:
        self.bytes_up += record.bytes_up
        self.bytes_down += record.bytes_down
        if record.accuracy is not None:
            self.last_accuracy = record.accuracy


def progress_text(record: RoundRecord, so_far: RunSoFar) -> str:
    """``sim 1,234s acc 91.2% up 0.42MB down 3.10MB ok 5 cut 0 late 1`` (the bar shows the round)."""
    acc = f"{so_far.last_accuracy * 100:.1f}%" if so_far.last_accuracy is not None else "-"
    return (f"sim {record.sim_end_s:,.0f}s acc {acc} up {so_far.bytes_up / 1e6:.2f}MB "
            f"down {so_far.bytes_down / 1e6:.2f}MB ok {record.completed} cut {record.cut} late {record.late}")


class Progress:
    def __init__(self, rounds: int, enabled: bool = True) -> None:
        self.bar = None
        self.so_far = RunSoFar()
        if enabled and sys.stderr.isatty():
            self.bar = tqdm(total=rounds, unit="round", dynamic_ncols=True, file=sys.stderr)

    @property
    def last_accuracy(self) -> float | None:
        return self.so_far.last_accuracy

    def update(self, record: RoundRecord, total_bytes_up: int | None = None) -> None:
        """Called once per round with that round's record; totals are kept here
        (``total_bytes_up``, the caller's running upload total, is accepted and not needed)."""
        self.so_far.add(record)
        if self.bar is None:
            return
        self.bar.set_postfix_str(progress_text(record, self.so_far), refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
