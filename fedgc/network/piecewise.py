"""Piecewise-constant throughput and its cumulative curve: the shared core of trace and Gilbert–Elliott links.

A rate curve is given by segment boundaries ``times`` (seconds, ``times[0] == 0``), the rate of each
segment ``rates`` (bit/s, one fewer than ``times``) and the cumulative bits ``cum`` delivered at each
boundary. How long a transfer takes is read off the inverse of the cumulative curve: exact for the
piecewise-constant model, O(log n) per transfer.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable

import numpy as np


def cumulative(times: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Bits delivered from ``times[0]`` up to each boundary."""
    cum = np.zeros(len(times))
    np.cumsum(rates * np.diff(times), out=cum[1:])
    return cum


class PeriodicRate:
    """A rate curve replayed in a loop with period ``times[-1]`` (a throughput trace)."""

    def __init__(self, times: np.ndarray, rates: np.ndarray, label: str) -> None:
        times = np.asarray(times, dtype=float)
        rates = np.asarray(rates, dtype=float)
        if len(times) < 2 or len(rates) != len(times) - 1:
            raise ValueError(f"trace file {label}: needs at least two samples")
        if times[0] != 0.0 or np.any(np.diff(times) < 0):
            raise ValueError(f"trace file {label}: timestamps must start at 0 and never decrease")
        if np.any(rates < 0) or not np.all(np.isfinite(rates)):
            raise ValueError(f"trace file {label}: throughput must be finite and >= 0")
        keep = np.ones(len(rates), dtype=bool)  # merge runs of equal rate (mahimahi: idle milliseconds)
        keep[1:] = rates[1:] != rates[:-1]
        times, rates = np.append(times[:-1][keep], times[-1]), rates[keep]
        cum = cumulative(times, rates)
        if not cum[-1] > 0 or not times[-1] > 0:
            raise ValueError(f"trace file {label}: delivers nothing (zero throughput or zero duration)")
        self.label = label
        self.period = float(times[-1])
        self.per_period = float(cum[-1])
        # Python lists: bisect on a list is several times cheaper than np.searchsorted on a scalar.
        self._times: list[float] = times.tolist()
        self._rates: list[float] = rates.tolist()
        self._cum: list[float] = cum.tolist()

    def segments(self) -> list[tuple[float, float]]:
        """One period as (start s, rate bit/s) pairs, in order (for replaying the curve on a real link)."""
        return list(zip(self._times[:-1], self._rates))

    @property
    def mean_bps(self) -> float:
        return self.per_period / self.period

    def bits_at(self, t: float) -> float:
        """Cumulative bits delivered from time 0 to ``t`` (t >= 0)."""
        k, r = divmod(t, self.period)
        i = bisect_right(self._times, r) - 1
        i = min(i, len(self._rates) - 1)
        return k * self.per_period + self._cum[i] + self._rates[i] * (r - self._times[i])

    def time_of_bits(self, bits: float) -> float:
        """The earliest time at which ``bits`` cumulative bits have been delivered (bits > 0)."""
        k, rem = divmod(bits, self.per_period)
        if rem <= 0.0:
            k, rem = k - 1, self.per_period
        j = bisect_left(self._cum, rem)
        j = min(max(j, 1), len(self._cum) - 1)
        return k * self.period + self._times[j - 1] + (rem - self._cum[j - 1]) / self._rates[j - 1]

    def duration(self, start: float, bits: float) -> float:
        """Seconds to deliver ``bits`` starting at trace time ``start``."""
        if bits <= 0:
            return 0.0
        return max(self.time_of_bits(self.bits_at(start) + bits) - start, 0.0)


class GrowingRate:
    """A rate curve generated forward in time on demand (a Markov channel's sample path).

    ``segment(k)`` returns ``(end_time, rate)`` of the k-th segment; segment 0 starts at time 0.
    """

    first = 0  # index of the first segment still held (``forget_before``); class defaults for old pickles
    horizon = -math.inf  # no time before this is asked about again: segments ending by then are dropped

    def __init__(self, segment: Callable[[int], tuple[float, float]]) -> None:
        self._segment = segment
        self._times: list[float] = [0.0]
        self._rates: list[float] = []
        self._cum: list[float] = [0.0]

    def _extend(self) -> None:
        end, rate = self._segment(self.first + len(self._rates))
        self._cum.append(self._cum[-1] + rate * (end - self._times[-1]))
        self._times.append(end)
        self._rates.append(rate)
        if len(self._rates) > 1 and self._times[1] <= self.horizon:  # generated on the way to the horizon
            del self._times[0], self._cum[0], self._rates[0]
            self.first += 1

    @property
    def end(self) -> float:
        """How far the curve is generated."""
        return self._times[-1]

    def forget_before(self, t: float) -> None:
        """Drop the segments that end at or before ``t``, now and as they are generated: the curve is
        asked about ``t`` and later only from now on, so its memory follows the segments ahead, not the
        simulated time behind. The cumulative bits are kept as they were: every later answer is the
        same to the last bit."""
        self.horizon = max(self.horizon, t)
        i = min(bisect_right(self._times, self.horizon) - 1, len(self._rates))
        if i > 0:
            del self._times[:i], self._cum[:i], self._rates[:i]
            self.first += i

    def bits_at(self, t: float) -> float:
        """Cumulative bits delivered from time 0 to ``t`` (t >= 0, and not before what was forgotten)."""
        if t < self._times[0]:
            raise ValueError(f"rate curve asked about {t} s, before the {self._times[0]} s it has forgotten")
        while self._times[-1] <= t:
            self._extend()
        i = bisect_right(self._times, t) - 1
        return self._cum[i] + self._rates[i] * (t - self._times[i])

    def duration(self, start: float, bits: float) -> float:
        """Seconds to deliver ``bits`` starting at ``start``; inf if the path never delivers them."""
        if bits <= 0:
            return 0.0
        target = self.bits_at(start) + bits
        extended = 0
        while self._cum[-1] < target:
            if extended > 10_000_000:
                return math.inf
            self._extend()
            extended += 1
        j = bisect_left(self._cum, target)
        return max(self._times[j - 1] + (target - self._cum[j - 1]) / self._rates[j - 1] - start, 0.0)
