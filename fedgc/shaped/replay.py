"""Replaying throughput traces on shaped links: at each of the trace's rate changes, ``tc qdisc change``
sets the client's ``tbf`` to the new rate, on the trace's own schedule from a common start (trace time 0
= ``t0``, looping with the trace's period, as the network model's ``trace`` link with
``trace_random_start: false``). A segment of zero throughput is replayed at ``MIN_MBPS`` (tbf needs a
rate > 0)."""

from __future__ import annotations

import threading
import time

from fedgc.network.piecewise import PeriodicRate
from fedgc.shaped.netns import Star

MIN_MBPS = 0.01


def schedule(down: PeriodicRate, up: PeriodicRate, up_scale: float = 1.0) -> tuple[float, list[tuple[float, float, float]]]:
    """(period, [(time s, up Mbit/s, down Mbit/s)]) over one period, at every change of either curve."""
    if abs(down.period - up.period) > 1e-9:
        raise ValueError(f"trace replay: up and down traces need one period ({up.period} s vs {down.period} s)")
    times = sorted({t for t, _ in down.segments()} | {t for t, _ in up.segments()})

    def rate_at(segments: list[tuple[float, float]], t: float) -> float:
        current = segments[0][1]
        for start, rate in segments:
            if start > t:
                break
            current = rate
        return current

    down_s, up_s = down.segments(), up.segments()
    steps = [(t, max(MIN_MBPS, rate_at(up_s, t) * up_scale / 1e6), max(MIN_MBPS, rate_at(down_s, t) / 1e6))
             for t in times]
    return down.period, steps


class TraceReplay:
    """Drives ``star``'s client links through ``curves[i] = (down, up)`` (``up_scale`` applied to up)
    from ``t0`` (``time.time()``) until stopped; ``changes`` counts the rate changes made."""

    def __init__(self, star: Star, curves: list[tuple[PeriodicRate, PeriodicRate]], up_scale: float = 1.0) -> None:
        self.star = star
        self.plans = [schedule(down, up, up_scale) for down, up in curves]
        self.t0 = 0.0
        self.changes = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fedgc-trace-replay", daemon=True)

    def _run(self) -> None:
        try:
            events = []  # (trace time, client, up, down); looped below
            for i, (_, steps) in enumerate(self.plans):
                events += [(t, i, up, down) for t, up, down in steps]
            events.sort()
            period = self.plans[0][0]
            if any(abs(p - period) > 1e-9 for p, _ in self.plans):
                raise ValueError("trace replay: every client's trace needs the same period")
            for loop in range(1_000_000):
                for t, i, up, down in events:
                    when = self.t0 + loop * period + t
                    if self._stop.wait(max(0.0, when - time.time())):
                        return
                    self.star.set_rate(i, up, down)
                    self.changes += 1
        except BaseException as error:  # noqa: BLE001 — reported by stop()
            self.error = error

    def start(self) -> None:
        """Trace time 0 is now; the links are set to the first rates before this returns."""
        for i, (_, steps) in enumerate(self.plans):
            self.star.set_rate(i, steps[0][1], steps[0][2])
        self.t0 = time.time()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self.error is not None:
            raise RuntimeError(f"trace replay failed: {self.error}")
