"""One round on the simulated clock: download → compute → upload for each selected client.

The simpy ``Environment`` is passed in and lives for the whole run, so ``env.now`` is the run's
simulated time in seconds. A round's per-client times are computed in closed form from the links
(each transfer integrates its link's throughput from its own start time), the server's shared
bandwidth (max–min fair, :mod:`fedgc.network.fairshare`) and the availability processes; then the
clock is advanced to the round's end in one step. No simpy event per client: this is what keeps a
100,000-client round cheap (see bench/network.py).

Statuses: ``completed`` (kept update), ``late`` (still running when the round closed at the deadline,
or when every other client had delivered or dropped out), ``discarded`` (still running when the round
closed because the first ``keep_first`` updates were in: over-selection dropped it on purpose),
``cut`` (offline at the start or went offline during its download, compute or upload before the round
closed; the transfer is cut at that moment).
The round ends when the ``keep_first``-th kept update arrives; otherwise when every client has
delivered or dropped out; never after the deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import simpy

from fedgc.network.availability import ALWAYS, Availability
from fedgc.network.compute import Device
from fedgc.network.fairshare import fair_share
from fedgc.network.links.base import Link
from fedgc.network.protocol import IDEAL, Protocol

Status = Literal["completed", "late", "discarded", "cut"]


@dataclass
class ClientNetwork:
    link: Link
    device: Device
    availability: Availability = ALWAYS


DEFAULT_MAX_PHASE_S = 1e7  # 116 days: scenario key network.max_phase_s


class PhaseTooLong(ValueError):
    """The network model was asked to simulate a phase longer than its bound (one line)."""


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
    """Every client's link, device and availability, plus the server's (optional) shared bandwidth.

    ``server_up_bps`` is the server's sending capacity, shared by the clients' downloads;
    ``server_down_bps`` its receiving capacity, shared by the uploads. None: not a bottleneck.
    ``protocol``: the messaging protocol's own cost (:mod:`fedgc.network.protocol`; default none).
    """

    def __init__(self, env: simpy.Environment, clients: dict[int, ClientNetwork],
                 server_up_bps: float | None = None, server_down_bps: float | None = None,
                 protocol: Protocol = IDEAL, max_phase_s: float = DEFAULT_MAX_PHASE_S) -> None:
        self.max_phase_s = max_phase_s
        self.env = env
        self.clients = clients
        self.server_up_bps = server_up_bps
        self.server_down_bps = server_down_bps
        self.protocol = protocol

    def state_dict(self) -> dict[str, Any]:
        """The clock's time and every client's link, device and availability (their sample paths and
        generators); simpy's Environment itself is not state, only its time is."""
        return {"now": float(self.env.now), "clients": self.clients}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        clients, now = state["clients"], state["now"]
        if not isinstance(clients, dict) or set(clients) != set(self.clients) or type(now) not in (int, float):
            raise ValueError("the saved network does not fit this scenario's clients")
        if not all(isinstance(c, ClientNetwork) for c in clients.values()):
            raise TypeError("the saved network holds something that is not a client network")
        self.clients = clients
        self.env = simpy.Environment(initial_time=now)

    def online_nodes(self, node_ids: list[int]) -> list[int]:
        """The given nodes that are online at ``env.now`` (unknown ids are not)."""
        now = self.env.now
        clients = self.clients
        return [n for n in node_ids if n in clients and clients[n].availability.is_online(now)]

    def wait_for_online(self, node_ids: list[int]) -> None:
        """Advance the clock to the first moment one of the given nodes is online, as a server waits
        for clients to check in (no-op if one is online now, or none ever will be)."""
        now = self.env.now
        first = min((self.clients[n].availability.next_on(now) for n in node_ids if n in self.clients),
                    default=math.inf)
        if now < first < math.inf:
            if first - now > self.max_phase_s:
                raise PhaseTooLong(f"no client comes online for {first - now:.3g} s of simulated time, more than "
                                   f"network.max_phase_s = {self.max_phase_s:g}")
            self.env.run(until=first)

    def _compute_s(self, job: ClientJob, client: ClientNetwork) -> float:
        """The client's compute phase; longer than ``max_phase_s`` is an error naming the client (the
        samples charged are what the server asked for, so this is the scenario's device, not a claim)."""
        seconds = client.device.compute_time(job.compute_samples)
        if not seconds <= self.max_phase_s:
            raise PhaseTooLong(f"client {job.node_id}: its compute phase ({job.compute_samples} samples) would last "
                               f"{seconds:.3g} s of simulated time, more than network.max_phase_s = {self.max_phase_s:g}")
        return seconds

    def _phases(self, jobs: list[ClientJob], start: float) -> tuple[list[float], list[float], list[float], list[float]]:
        """Per client: downloaded, computed, uploaded (inf where not reached) and the offline time."""
        if not self.protocol.ideal:
            return self._protocol_phases(jobs, start)
        n = len(jobs)
        inf = math.inf
        clients = [self.clients[job.node_id] for job in jobs]
        off = [c.availability.next_off(start) for c in clients]
        down = [inf] * n
        comp = [inf] * n
        up = [inf] * n
        if self.server_up_bps is None and self.server_down_bps is None:
            for i, (job, client) in enumerate(zip(jobs, clients)):
                if off[i] <= start:
                    continue
                link = client.link
                d = start + link.transfer_time(start, job.down_bytes, "down")
                if d > off[i]:
                    continue
                down[i] = d
                c = d + self._compute_s(job, client)
                if c > off[i]:
                    continue
                comp[i] = c
                u = c + link.transfer_time(c, job.up_bytes, "up")
                if u <= off[i]:
                    up[i] = u
            return down, comp, up, off
        arrive = [start if off[i] > start else inf for i in range(n)]
        down = self._transfers(clients, arrive, [j.down_bytes for j in jobs], off, "down", self.server_up_bps)
        for i, (job, client) in enumerate(zip(jobs, clients)):
            if down[i] < inf:
                c = down[i] + self._compute_s(job, client)
                comp[i] = c if c <= off[i] else inf
        up = self._transfers(clients, comp, [j.up_bytes for j in jobs], off, "up", self.server_down_bps)
        return down, comp, up, off

    def _protocol_phases(self, jobs: list[ClientJob], start: float
                         ) -> tuple[list[float], list[float], list[float], list[float]]:
        """``_phases`` with the protocol's costs: every download starts ``pickup_s`` late, each transfer
        is charged its request round trips (the link's RTT each) after its last byte, and an upload ends
        when the server holds the reply (``Protocol.held``: reply poll, object-pull backoff)."""
        proto = self.protocol
        n = len(jobs)
        inf = math.inf
        clients = [self.clients[job.node_id] for job in jobs]
        off = [c.availability.next_off(start) for c in clients]
        rtt = [2.0 * c.link.one_way_s for c in clients]
        pickup = start + proto.pickup_s
        arrive = [pickup if off[i] > pickup else inf for i in range(n)]
        down = self._transfers(clients, arrive, [j.down_bytes for j in jobs], off, "down", self.server_up_bps)
        down = [d + proto.requests_down * rtt[i] for i, d in enumerate(down)]
        down = [d if d <= off[i] else inf for i, d in enumerate(down)]
        comp = [inf] * n
        for i, (job, client) in enumerate(zip(jobs, clients)):
            if down[i] < inf:
                c = down[i] + self._compute_s(job, client)
                comp[i] = c if c <= off[i] else inf
        up = self._transfers(clients, comp, [j.up_bytes for j in jobs], off, "up", self.server_down_bps)
        up = [u + proto.requests_up * rtt[i] for i, u in enumerate(up)]
        # The server holds a reply when its object pulls, retried with backoff, find the last byte there.
        up = [proto.held(start, comp[i], u) if u <= off[i] else inf for i, u in enumerate(up)]
        return down, comp, up, off

    @staticmethod
    def _transfers(clients: list[ClientNetwork], arrive: list[float], nbytes: list[int], off: list[float],
                   direction: Literal["up", "down"], capacity: float | None) -> list[float]:
        """Delivery time of each transfer (inf if it never starts or is cut), through a shared server link."""
        n = len(clients)
        inf = math.inf
        serial = [inf] * n
        latency = [0.0] * n
        for i in range(n):
            if arrive[i] < inf:
                serial[i] = clients[i].link.serialize_time(arrive[i], nbytes[i], direction)
                latency[i] = clients[i].link.latency()
        if capacity is None:
            ends = [arrive[i] + serial[i] for i in range(n)]
        else:
            # A flow's cap is its link-only average rate over this transfer (exact for constant links).
            work = [8.0 * b for b in nbytes]
            cap = [work[i] / serial[i] if 0 < serial[i] < inf else inf for i in range(n)]
            ends = fair_share(arrive, work, cap, off, capacity)
        return [e + lat if e + lat <= o else inf for e, lat, o in zip(ends, latency, off)]

    def run_round(self, jobs: list[ClientJob], deadline_s: float | None = None,
                  keep_first: int | None = None) -> RoundTimeline:
        """Advance the clock through one round; ``keep_first``: the round closes at that many arrivals."""
        env = self.env
        start = env.now
        if keep_first is not None and keep_first < 1:
            raise ValueError("keep_first must be >= 1")
        if deadline_s is not None and not deadline_s > 0:
            raise ValueError("deadline_s must be > 0")
        unknown = [job.node_id for job in jobs if job.node_id not in self.clients]
        if unknown:
            raise ValueError(f"run_round: unknown node id {unknown[0]}")
        if not jobs:
            return RoundTimeline(start=start, end=start)
        for job in jobs:  # the clock only goes forward: what a link generated before now is not asked again
            self.clients[job.node_id].link.forget_before(start)
        down, comp, up, off = self._phases(jobs, start)
        n = len(jobs)
        wanted = min(n, keep_first) if keep_first else n
        limit = start + deadline_s if deadline_s is not None else math.inf

        ups = np.asarray(up)
        order = np.argsort(ups, kind="stable")[:wanted]
        kept = order[(ups[order] <= limit) & np.isfinite(ups[order])]
        # Closed on the K-th arrival with clients still running: those are discarded, not late.
        not_waited_for: Literal["discarded", "late"] = "discarded" if len(kept) == wanted < n else "late"
        if len(kept) == wanted:
            end = float(ups[kept[-1]])
        else:  # every client delivered or dropped out, capped by the deadline
            resolved = np.where(np.isfinite(ups), ups, np.asarray(off))
            finite = resolved[np.isfinite(resolved)]
            last = float(finite.max()) if finite.size else start
            end = limit if (finite.size < n and limit < math.inf) else min(last, limit)
            end = max(end, start)
        is_kept = np.zeros(n, dtype=bool)
        is_kept[kept] = True

        timings = []
        for i, job in enumerate(jobs):
            timing = ClientTiming(node_id=job.node_id, start=start)
            if is_kept[i]:
                timing.downloaded, timing.computed, timing.uploaded = down[i], comp[i], up[i]
                timing.status = "completed"
            else:
                d, c = down[i], comp[i]
                timing.downloaded = d if d <= end else None
                timing.computed = c if c <= end else None
                cut = up[i] == math.inf and off[i] <= end
                timing.status = "cut" if cut else not_waited_for
            timings.append(timing)
        if end > env.now:
            env.run(until=end)
        return RoundTimeline(start=start, end=end, timings=timings)
