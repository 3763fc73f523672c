"""When a client is online: always, an exponential on/off process, or intervals read from a file.

Each process answers two questions about simulated time t: ``is_online(t)`` and ``next_off(t)``, the
first moment at or after t when the client is offline (t itself when it is offline at t, inf when it
never goes offline). Online intervals are half-open: [on, off).

Interval file (``network.availability: {name: trace, file: ...}``): CSV with the header ``client,start_s,end_s``; each row
is one online interval of client number ``client`` (0, 1, ... in the order of the run's node ids,
taken modulo the number of clients in the file). With a period the intervals repeat every period.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from pathlib import Path

import numpy as np

from fedgc.network.csvfile import read_csv_rows


class Availability:
    """Always online."""

    def is_online(self, t: float) -> bool:
        return True

    def next_off(self, t: float) -> float:
        return math.inf

    def next_on(self, t: float) -> float:
        """The first moment ≥ t at which the client is online (inf: never again)."""
        return t


ALWAYS = Availability()


class ExponentialOnOff(Availability):
    """Alternating online/offline periods, exponential with means ``mean_on_s`` / ``mean_off_s``.

    Starts in the stationary distribution (online with probability on/(on+off)); the switching times
    are drawn lazily, so the process is defined for the whole run and queries are O(log n).
    """

    def __init__(self, mean_on_s: float, mean_off_s: float, rng: np.random.Generator) -> None:
        if not (mean_on_s > 0 and mean_off_s > 0):
            raise ValueError("availability mean_on_s and mean_off_s must be > 0")
        self.means = (mean_off_s, mean_on_s)  # indexed by "online" (0/1)
        self.rng = rng
        self.first_online = bool(rng.random() < mean_on_s / (mean_on_s + mean_off_s))
        self._switches: list[float] = [0.0]  # state k holds over [switches[k], switches[k+1])

    def _state(self, t: float) -> tuple[bool, float]:
        """Online at t, and when that state ends."""
        while self._switches[-1] <= t:
            k = len(self._switches) - 1
            online = self.first_online ^ bool(k % 2)
            self._switches.append(self._switches[-1] + self.rng.exponential(self.means[online]))
        k = bisect_right(self._switches, t) - 1
        return self.first_online ^ bool(k % 2), self._switches[k + 1]

    def is_online(self, t: float) -> bool:
        return self._state(t)[0]

    def next_off(self, t: float) -> float:
        online, end = self._state(t)
        return end if online else t

    def next_on(self, t: float) -> float:
        online, end = self._state(t)
        return t if online else end


class IntervalAvailability(Availability):
    """Online during the given [start, end) intervals (merged), optionally repeating every ``period_s``."""

    def __init__(self, intervals: list[tuple[float, float]], period_s: float | None = None) -> None:
        merged: list[list[float]] = []
        for start, end in sorted((s, e) for s, e in intervals if e > s):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        if period_s is not None and merged and merged[-1][1] > period_s:
            raise ValueError(f"availability interval ends at {merged[-1][1]} s, after the period {period_s} s")
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]
        self.period = period_s
        self.always = bool(period_s is not None and merged and merged[0] == [0.0, period_s])

    def _local(self, t: float) -> tuple[float, float]:
        if self.period is None:
            return 0.0, t
        k, r = divmod(t, self.period)
        return k * self.period, r

    def _find(self, r: float) -> int:
        """Index of the interval containing local time r, or -1."""
        i = bisect_right(self.starts, r) - 1
        return i if i >= 0 and r < self.ends[i] else -1

    def is_online(self, t: float) -> bool:
        return self.always or self._find(self._local(t)[1]) >= 0

    def next_off(self, t: float) -> float:
        if self.always:
            return math.inf
        base, r = self._local(t)
        i = self._find(r)
        if i < 0:
            return t
        end = base + self.ends[i]
        if self.period is not None and self.ends[i] == self.period and self.starts[0] == 0.0:
            end += self.ends[0]  # the interval runs on into the next period's first one
        return end

    def next_on(self, t: float) -> float:
        if self.always or self.is_online(t):
            return t
        base, r = self._local(t)
        i = bisect_right(self.starts, r)  # the first interval that starts after r
        if i < len(self.starts):
            return base + self.starts[i]
        if self.period is not None and self.starts:
            return base + self.period + self.starts[0]
        return math.inf


def read_interval_file(path: str | Path) -> dict[int, list[tuple[float, float]]]:
    """``client,start_s,end_s`` rows → online intervals per client number. One-line ValueError on any problem."""
    path = Path(path)
    rows = read_csv_rows(path, "availability file")
    intervals: dict[int, list[tuple[float, float]]] = {}
    try:
        for row in rows:
            start, end = float(row["start_s"]), float(row["end_s"])
            if not (0 <= start <= end < math.inf):
                raise ValueError
            intervals.setdefault(int(row["client"]), []).append((start, end))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"availability file {path}: expected rows client,start_s,end_s with 0 <= start <= end, finite") from None
    if not intervals:
        raise ValueError(f"availability file {path}: no intervals")
    if all(end <= start for rows_ in intervals.values() for start, end in rows_):
        raise ValueError(f"availability file {path}: every interval is empty (end_s == start_s), "
                         "so no client would ever be online")
    return intervals
