"""``gilbert_elliott``: a two-state (good/bad) Markov channel with per-state throughput and loss.

Parameterisation (continuous time): the channel stays in *good* for an exponential time with mean
``mean_good_s`` and in *bad* for an exponential time with mean ``mean_bad_s``. With the transition
rates p = 1/mean_good_s (good→bad) and r = 1/mean_bad_s (bad→good), the long-run fraction of time in
*bad* is p/(p+r) = mean_bad_s/(mean_good_s + mean_bad_s). The chain starts in its stationary
distribution at time 0 and one sample path is shared by the uplink and the downlink.

In state s a direction delivers goodput = throughput_s × (1 − loss_s): lost packets are resent, so
loss only scales the useful rate. *Good* throughput is the link's nominal rate; *bad* throughput is
``bad_factor`` × nominal. A transfer's serialization time integrates the goodput over the state
changes from the moment it starts.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from fedgc.network.links.base import Direction, Link, LinkInputs
from fedgc.network.piecewise import GrowingRate

GOOD, BAD = 0, 1


class _DirectionSegments:
    """The k-th constant-rate segment of one direction (a class, not a closure, so a run's network
    state can be pickled into a checkpoint)."""

    def __init__(self, link: GilbertElliottLink, rates: tuple[float, float]) -> None:
        self.link = link
        self.rates = rates

    def __call__(self, k: int) -> tuple[float, float]:
        end, state = self.link._state_segment(k)
        return end, self.rates[state]


class GilbertElliottLink(Link):
    @classmethod
    def for_clients(cls, section: Any, inputs: LinkInputs) -> list[Link]:
        return [cls(float(up), float(down), inputs.rtt_ms, inputs.jitter_ms, rng, mean_good_s=section.mean_good_s,
                    mean_bad_s=section.mean_bad_s, bad_factor=section.bad_factor, good_loss=section.good_loss,
                    bad_loss=section.bad_loss)
                for up, down, rng in zip(inputs.up_mbps, inputs.down_mbps, inputs.rngs)]

    def __init__(self, up_mbps: float, down_mbps: float, rtt_ms: float = 0.0, jitter_ms: float = 0.0,
                 rng: np.random.Generator | None = None, *, mean_good_s: float = 10.0, mean_bad_s: float = 2.0,
                 bad_factor: float = 0.1, good_loss: float = 0.0, bad_loss: float = 0.05) -> None:
        super().__init__(rtt_ms, jitter_ms, rng if rng is not None else np.random.default_rng(0))
        if not (up_mbps > 0 and down_mbps > 0):
            raise ValueError("link throughput must be > 0 Mbit/s")
        if not (mean_good_s > 0 and mean_bad_s > 0):
            raise ValueError("Gilbert-Elliott mean sojourn times must be > 0 s")
        if not (0 <= good_loss < 1 and 0 <= bad_loss <= 1 and 0 <= bad_factor):
            raise ValueError("Gilbert-Elliott losses must be in [0, 1) (good) / [0, 1] (bad), bad_factor >= 0")
        self.mean_s = (mean_good_s, mean_bad_s)
        self.goodput = {
            d: (mbps * 1e6 * (1 - good_loss), mbps * 1e6 * bad_factor * (1 - bad_loss))
            for d, mbps in (("up", up_mbps), ("down", down_mbps))
        }
        self.bad_fraction = mean_bad_s / (mean_good_s + mean_bad_s)
        # cast: the super().__init__ call above passed a generator, never None
        first = BAD if cast(np.random.Generator, self.rng).random() < self.bad_fraction else GOOD
        self._ends: list[float] = []
        self._states: list[int] = [first]
        self._curves = {d: GrowingRate(self._segment_fn(d)) for d in ("up", "down")}

    first = 0  # index of the first sojourn still held (``forget_before``); a class default for old pickles

    def _state_segment(self, k: int) -> tuple[float, int]:
        """End time and state of the k-th sojourn of the shared sample path."""
        while self.first + len(self._ends) <= k:
            state = self._states[len(self._ends)]
            start = self._ends[-1] if self._ends else 0.0
            # cast: __init__ passed Link a generator, never None
            self._ends.append(start + cast(np.random.Generator, self.rng).exponential(self.mean_s[state]))
            self._states.append(1 - state)
        return self._ends[k - self.first], self._states[k - self.first]

    def forget_before(self, t: float) -> None:
        """Keep only the sample path from ``t`` on: both directions' curves are generated up to ``t`` a
        stretch at a time (the sojourns are drawn in order whoever asks, so the path is the same), and
        what lies behind is dropped as they go. Memory stays bounded however long the simulated time
        and however long a client waited between its rounds."""
        curves = list(self._curves.values())
        for curve in curves:
            curve.forget_before(t)
        stretch = 1000.0 * sum(self.mean_s)
        while behind := [c for c in curves if c.end < t]:
            for curve in behind:
                curve.bits_at(min(curve.end + stretch, t))
            self._drop_sojourns()
        self._drop_sojourns()

    def _drop_sojourns(self) -> None:
        """Drop the sojourns that both curves have left behind."""
        drop = min(min(c.first for c in self._curves.values()) - self.first, len(self._ends) - 1)
        if drop > 0:
            del self._ends[:drop], self._states[:drop]
            self.first += drop

    def _segment_fn(self, direction: Direction) -> _DirectionSegments:
        return _DirectionSegments(self, self.goodput[direction])

    def time_in_bad(self, until: float) -> float:
        """Seconds spent in *bad* during [0, until] on this link's sample path (none of it forgotten)."""
        if self.first:
            raise ValueError("time_in_bad: this link has forgotten the start of its sample path")
        total, start, k = 0.0, 0.0, 0
        while start < until:
            end, state = self._state_segment(k)
            if state == BAD:
                total += min(end, until) - start
            start, k = end, k + 1
        return total

    def serialize_time(self, start: float, nbytes: int, direction: Direction) -> float:
        return self._curves[direction].duration(start, nbytes * 8.0)

    def mean_bps(self, direction: Direction) -> float:
        good, bad = self.goodput[direction]
        return good * (1 - self.bad_fraction) + bad * self.bad_fraction
