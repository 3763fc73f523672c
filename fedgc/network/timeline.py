"""One round on the simulated clock: download → compute → upload for each selected client.

The simpy ``Environment`` is passed in and lives for the whole run, so ``env.now`` is the run's
simulated time in seconds. A round ends when the last kept update arrives, or at the deadline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import simpy

from fedgc.network.device import Device
from fedgc.network.links.base import Link

Status = Literal["completed", "late", "cut"]


@dataclass
class ClientNetwork:
    link: Link
    device: Device


@dataclass(frozen=True)
class ClientJob:
    node_id: int
    down_bytes: int
    compute_samples: int
    up_bytes: int


@dataclass
class ClientTiming:
    node_id: int
    start: float
    downloaded: float | None = None
    computed: float | None = None
    uploaded: float | None = None
    status: Status = "cut"


@dataclass
class RoundTimeline:
    start: float
    end: float
    timings: list[ClientTiming] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for t in self.timings if t.status == status)


class NetworkModel:
    def __init__(self, env: simpy.Environment, clients: dict[int, ClientNetwork]) -> None:
        self.env = env
        self.clients = clients

    def online_nodes(self, node_ids: list[int]) -> list[int]:
        return [n for n in node_ids if n in self.clients]

    def _client_round(self, job: ClientJob, timing: ClientTiming, arrivals: list[ClientTiming], done: simpy.Event,
                      wanted: int):
        client = self.clients[job.node_id]
        env = self.env
        try:
            yield env.timeout(client.link.transfer_time(env.now, job.down_bytes, "down"))
            timing.downloaded = env.now
            yield env.timeout(client.device.compute_time(job.compute_samples))
            timing.computed = env.now
            yield env.timeout(client.link.transfer_time(env.now, job.up_bytes, "up"))
            timing.uploaded = env.now
            timing.status = "completed"
            arrivals.append(timing)
            if len(arrivals) >= wanted and not done.triggered:
                done.succeed()
        except simpy.Interrupt:
            timing.status = "late"

    def run_round(self, jobs: list[ClientJob], deadline_s: float | None = None,
                  keep_first: int | None = None) -> RoundTimeline:
        """Advance the clock through one round. ``keep_first``: stop after that many arrivals."""
        env = self.env
        start = env.now
        wanted = min(len(jobs), keep_first) if keep_first else len(jobs)
        timeline = RoundTimeline(start=start, end=start)
        if not jobs:
            return timeline
        done = env.event()
        arrivals: list[ClientTiming] = []
        processes = []
        for job in jobs:
            timing = ClientTiming(node_id=job.node_id, start=start)
            timeline.timings.append(timing)
            processes.append(env.process(self._client_round(job, timing, arrivals, done, wanted)))
        stop = done if deadline_s is None else done | env.timeout(deadline_s)
        env.run(until=stop)
        for process in processes:
            if process.is_alive:
                process.interrupt()
        while env.peek() == env.now:  # deliver the interrupts without advancing time
            env.step()
        timeline.end = arrivals[-1].uploaded if (done.triggered and arrivals) else env.now
        return timeline
