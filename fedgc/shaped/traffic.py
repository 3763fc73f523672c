"""What crossed each interface of a namespace, and when: byte counters sampled every few milliseconds
from ``/proc/PID/net/dev`` of a process inside the namespace, and the transfers ("flows") read off them.

A flow is a run of samples in which an interface's counter grows, with no gap longer than ``gap_s``;
small ones (protocol polls, heartbeats) are told apart from the transfers by their size.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


def read_counters(pid: int) -> dict[str, tuple[int, int]]:
    """{interface: (rx bytes, tx bytes)} in the network namespace of process ``pid``."""
    counters = {}
    with open(f"/proc/{pid}/net/dev") as f:
        for line in f.readlines()[2:]:
            name, _, rest = line.partition(":")
            fields = rest.split()
            counters[name.strip()] = (int(fields[0]), int(fields[8]))
    return counters


@dataclass(frozen=True)
class Flow:
    start: float  # time.time() of the last sample before the counter grew
    end: float  # time.time() of the sample where it stopped growing
    nbytes: int

    @property
    def duration(self) -> float:
        return self.end - self.start


class CounterSampler:
    """Samples the counters of ``interfaces`` in ``pid``'s namespace every ``period_s`` on a thread."""

    def __init__(self, pid: int, interfaces: list[str], period_s: float = 0.01) -> None:
        self.pid = pid
        self.interfaces = interfaces
        self.period_s = period_s
        self.samples: list[tuple[float, dict[str, tuple[int, int]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fedgc-shaped-counters", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                counters = read_counters(self.pid)
            except OSError:
                return  # the namespace's process is gone
            self.samples.append((time.time(), {i: counters.get(i, (0, 0)) for i in self.interfaces}))
            self._stop.wait(self.period_s)

    def __enter__(self) -> CounterSampler:  # noqa: PYI034
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def flows(self, interface: str, direction: str, *, gap_s: float = 0.3, min_bytes: int = 1,
              tail_bytes: int = 0, min_step: int = 1) -> list[Flow]:
        """Flows on ``interface`` (``"rx"`` or ``"tx"``) of at least ``min_bytes``, in time order. A flow
        ends when its counter came within ``tail_bytes`` of its total: a protocol poll that follows a
        transfer within ``gap_s`` joins its flow without moving its end. Growth of less than
        ``min_step`` bytes between two samples (the ACKs of a transfer the other way, a poll) is not
        activity: it neither starts a flow nor keeps one going, though a flow counts its bytes."""
        column = {"rx": 0, "tx": 1}[direction]
        runs: list[tuple[float, int, list[tuple[float, int]]]] = []  # (start, bytes before, growth samples)
        prev_t, prev = None, 0
        for t, counters in self.samples:
            value = counters[interface][column]
            if prev_t is not None and value - prev >= min_step:
                if not runs or t - runs[-1][2][-1][0] > gap_s:
                    runs.append((prev_t, prev, []))
                runs[-1][2].append((t, value))
            prev, prev_t = value, t
        flows = []
        for start, before, grown in runs:
            total = grown[-1][1]
            end = next(t for t, value in grown if value >= total - tail_bytes)
            flows.append(Flow(start, end, total - before))
        return [f for f in flows if f.nbytes >= min_bytes]
