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
    failed: int = 0  # clients whose ClientApp raised, over the whole run

    def add(self, record: RoundRecord) -> None:
        self.bytes_up += record.bytes_up
        self.bytes_down += record.bytes_down
        self.failed += record.failed
        if record.accuracy is not None:
            self.last_accuracy = record.accuracy


def _sim_time(seconds: float) -> str:
    if seconds < 100:
        return f"{seconds:.1f}s"
    return f"{seconds:,.0f}s" if seconds < 2 * 3600 else f"{seconds / 3600:,.1f}h"


def _megabytes(count: int) -> str:
    return f"{count / 1e6:.3f}MB" if count < 1e6 else f"{count / 1e6:,.2f}MB"


def progress_text(record: RoundRecord, so_far: RunSoFar) -> str:
    """``sim 1,234s acc 91.2% up 0.420MB down 3.10MB ok 5 cut 0 late 1 disc 2 failed 0/3`` (the bar
    shows the round): the last round's clients, then failed in the last round / over the run."""
    acc = f"{so_far.last_accuracy * 100:.1f}%" if so_far.last_accuracy is not None else "-"
    return (f"sim {_sim_time(record.sim_end_s)} acc {acc} up {_megabytes(so_far.bytes_up)} "
            f"down {_megabytes(so_far.bytes_down)} ok {record.completed} cut {record.cut} late {record.late} "
            f"disc {record.discarded} failed {record.failed}/{so_far.failed}")


class Progress:
    """``history``: the rounds already done (a resumed run), so the bar and the totals start there."""

    def __init__(self, rounds: int, enabled: bool = True, history: list[RoundRecord] | tuple = ()) -> None:
        self.bar = None
        self.so_far = RunSoFar()
        for record in history:
            self.so_far.add(record)
        if enabled and sys.stderr.isatty():
            done = max((r.round for r in history), default=0)
            self.bar = tqdm(total=rounds, initial=done, unit="round", dynamic_ncols=True, file=sys.stderr)

    @property
    def last_accuracy(self) -> float | None:
        return self.so_far.last_accuracy

    def update(self, record: RoundRecord, total_bytes_up: int | None = None) -> None:
        """Called with each round's record. ``total_bytes_up``: the caller's running upload total over
        every round of the run (resumed rounds included); when given it is the one shown."""
        self.so_far.add(record)
        if total_bytes_up is not None:
            self.so_far.bytes_up = total_bytes_up
        if self.bar is None:
            return
        self.bar.set_postfix_str(progress_text(record, self.so_far), refresh=False)
        self.bar.update(record.round - self.bar.n)  # the bar follows the round number (a retried round repeats it)

    def note(self, line: str) -> None:
        """One line on stderr (through the bar when there is one), shown even without a bar."""
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
