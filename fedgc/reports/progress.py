"""The progress line during a run: round, simulated time, accuracy, MB up/down, participation.

One line on an interactive terminal, redrawn after every round and fitted to the terminal's width
(a terminal that reports 0 columns, as some pseudo-terminals do, is taken as 80 wide); the mobile
fields (ok / cut / late / disc / fail) are the last to go. Silent when stderr is not a terminal or
with ``--quiet``. The time left is shown from the second round timed by this process on, at the
pace of the rounds after the first (the first also pays for start-up: imports, data, warm-up).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from fedgc.runs.metrics import RoundRecord

DEFAULT_WIDTH = 80  # what a terminal that reports no width is taken to be


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


def _short_bytes(count: int) -> str:
    """Three significant figures: ``420kB``, ``3.10MB``, ``9.88GB``."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if count >= scale * 0.9995:
            value = count / scale
            return (f"{value:.3g}" if value < 1000 else f"{value:.0f}") + unit
    return f"{count}B"


def _duration(seconds: float) -> str:
    """``42s``, ``3:05`` (min:s), ``2:03:00`` (h:min:s)."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}" if minutes else f"{secs}s"


def progress_text(record: RoundRecord, so_far: RunSoFar) -> str:
    """``sim 1,234s acc 91.2% up 0.420MB down 3.10MB ok 5 cut 0 late 1 disc 2 failed 0/3``: the last
    round's clients, then failed in the last round / over the run (the widest form, without round or ETA)."""
    acc = f"{so_far.last_accuracy * 100:.1f}%" if so_far.last_accuracy is not None else "-"
    return (f"sim {_sim_time(record.sim_end_s)} acc {acc} up {_megabytes(so_far.bytes_up)} "
            f"down {_megabytes(so_far.bytes_down)} ok {record.completed} cut {record.cut} late {record.late} "
            f"disc {record.discarded} failed {record.failed}/{so_far.failed}")


def progress_line(record: RoundRecord, so_far: RunSoFar, rounds: int, width: int,
                  eta_s: float | None = None) -> str:
    """The line for a terminal ``width`` columns wide (< 1: taken as 80), at most ``width - 1``
    characters (the cursor stays on the line). From the widest form down, the labels shorten, then
    the simulated time, the traffic and the accuracy go; the mobile fields stay to the end."""
    width = (width if width > 0 else DEFAULT_WIDTH) - 1
    acc = f"{so_far.last_accuracy * 100:.1f}%" if so_far.last_accuracy is not None else "-"
    up, down = _megabytes(so_far.bytes_up), _megabytes(so_far.bytes_down)
    short_up, short_down = _short_bytes(so_far.bytes_up), _short_bytes(so_far.bytes_down)
    where = f"{record.round}/{rounds}"
    eta = f" eta {_duration(eta_s)}" if eta_s is not None else ""
    mobile = (f"ok {record.completed} cut {record.cut} late {record.late} disc {record.discarded} "
              f"fail {record.failed}/{so_far.failed}")
    terse = (f"ok{record.completed} cut{record.cut} late{record.late} disc{record.discarded} "
             f"fail{record.failed}/{so_far.failed}")
    sim = _sim_time(record.sim_end_s)
    forms = (
        f"round {where} sim {sim} acc {acc} up {up} down {down} | {mobile}{eta}",
        f"{where} sim {sim} acc {acc} up {up} dn {down} | {mobile}{eta}",
        f"{where} {sim} {acc} up {up} dn {down} {terse}{eta}",
        f"{where} {sim} {acc} up {short_up} dn {short_down} {terse}{eta}",
        f"{where} {acc} up {short_up} dn {short_down} {terse}{eta}",
        f"{where} {acc} {terse}{eta}",
        f"{where} {terse}{eta}",
        f"{where} {terse}",
    )
    for form in forms:
        if len(form) <= width:
            return form
    return forms[-1][:max(width, 0)]


def terminal_width(stream: TextIO | None = None) -> int:
    """Columns of the terminal ``stream`` (default stderr) writes to; 80 when it reports none."""
    try:
        columns = os.get_terminal_size((stream or sys.stderr).fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return columns if columns > 0 else DEFAULT_WIDTH


class _Eta:
    """Time left, from the wall-clock pace of the rounds this process timed after its first."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.first: tuple[int, float] | None = None  # (round, time) when the first timed round ended
        self.last: tuple[int, float] | None = None

    def tick(self, round_number: int) -> None:
        now = (round_number, self.clock())
        if self.first is None:
            self.first = now
        self.last = now

    def left(self, rounds: int) -> float | None:
        if self.first is None or self.last is None or self.last[0] <= self.first[0]:
            return None  # one round timed (or a retried round): its pace includes start-up
        pace = (self.last[1] - self.first[1]) / (self.last[0] - self.first[0])
        return pace * max(rounds - self.last[0], 0)


class Progress:
    """``history``: the rounds already done (a resumed run), so the line and the totals start there.
    ``stream``/``width``/``clock``: for tests (a fixed width instead of the terminal's)."""

    def __init__(self, rounds: int, enabled: bool = True, history: list[RoundRecord] | tuple[RoundRecord, ...] = (),
                 stream: TextIO | None = None, width: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rounds = rounds
        self.so_far = RunSoFar()
        for record in history:
            self.so_far.add(record)
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.eta = _Eta(clock)
        self.line = ""  # what is on the terminal's last line now
        on_terminal = stream is not None or self.stream.isatty()
        self.drawing = enabled and on_terminal

    @property
    def bar(self) -> Progress | None:
        """None when nothing is drawn (not a terminal, or ``--quiet``)."""
        return self if self.drawing else None

    @property
    def last_accuracy(self) -> float | None:
        return self.so_far.last_accuracy

    def _draw(self, text: str) -> None:
        self.stream.write("\r\x1b[K" + text)
        self.stream.flush()
        self.line = text

    def update(self, record: RoundRecord, total_bytes_up: int | None = None) -> None:
        """Called with each round's record. ``total_bytes_up``: the caller's running upload total over
        every round of the run (resumed rounds included); when given it is the one shown."""
        self.so_far.add(record)
        if total_bytes_up is not None:
            self.so_far.bytes_up = total_bytes_up
        self.eta.tick(record.round)
        if not self.drawing:
            return
        width = self.width if self.width is not None else terminal_width(self.stream)
        self._draw(progress_line(record, self.so_far, self.rounds, width, self.eta.left(self.rounds)))

    def note(self, line: str) -> None:
        """One line on stderr (above the progress line when there is one), shown even without it."""
        if not self.drawing:
            print(line, file=sys.stderr)
            return
        shown = self.line
        self.stream.write("\r\x1b[K" + line + "\n")
        if shown:
            self._draw(shown)

    def close(self) -> None:
        if self.drawing and self.line:
            self.stream.write("\n")
            self.stream.flush()
            self.line = ""
