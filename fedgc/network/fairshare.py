"""The server's bandwidth shared fairly among concurrent transfers (max–min fair processor sharing).

Each flow i arrives at ``arrive[i]`` with ``work[i]`` bits and may send at most ``cap[i]`` bit/s (its
own link). While a set of flows is active, the server's ``capacity`` is water-filled: a flow whose cap
is below the fair level L gets its cap, the others all get L, where L makes the total equal the
capacity (or every flow gets its cap when they all fit). A flow stops early at ``abort[i]`` (its
client went offline).

Event-driven and exact for constant caps: flows at the fair level share one virtual clock V(t) = ∫L dt,
so their finish tags never need updating; capped flows have fixed real finish times. Only flows whose
cap crosses L move between the two groups. Cost O((n + moves) log n).
"""

from __future__ import annotations

import heapq
import math

_EPS = 1e-12
PENDING, CAPPED, SHARED, DONE = 0, 1, 2, 3


def fair_share(arrive: list[float], work: list[float], cap: list[float], abort: list[float],
               capacity: float) -> list[float]:
    """Finish time of each flow's last bit (math.inf when it was aborted first)."""
    return _Sharing(arrive, work, cap, abort, capacity).run()


class _Flows:
    """The active flows in their two groups: CAPPED (at their own cap; tag = real finish time) and
    SHARED (at the fair level; tag = virtual finish tag on the clock V). Heap entries carry the flow's
    version; an entry whose version is stale (the flow moved or left since) is skipped when it surfaces."""

    def __init__(self, n: int, cap: list[float], capacity: float) -> None:
        self.cap, self.capacity = cap, capacity
        self.mode = [PENDING] * n
        self.version = [0] * n
        self.tag = [0.0] * n
        self.capped_fin: list[tuple[float, int, int]] = []  # by finish time
        self.capped_max: list[tuple[float, int, int]] = []  # by -cap: the first to join the shared group
        self.shared_fin: list[tuple[float, int, int]] = []  # by virtual finish tag
        self.shared_min: list[tuple[float, int, int]] = []  # by cap: the first to leave for its own cap
        self.t = 0.0  # real time
        self.V = 0.0  # virtual clock of the shared group: ∫ level dt
        self.sum_capped, self.n_capped, self.n_shared = 0.0, 0, 0

    def top(self, heap: list[tuple[float, int, int]], wanted: int) -> tuple[float, int, int] | None:
        """The heap's first entry still valid for a flow in group ``wanted``."""
        while heap and (self.mode[heap[0][2]] != wanted or self.version[heap[0][2]] != heap[0][1]):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def level(self) -> float:
        """The fair level: what each shared flow gets of the capacity the capped flows leave."""
        return (self.capacity - self.sum_capped) / self.n_shared if self.n_shared else math.inf

    def remaining(self, i: int) -> float:
        if self.mode[i] == CAPPED:
            return max(self.cap[i] * (self.tag[i] - self.t), 0.0)
        return max(self.tag[i] - self.V, 0.0)

    def leave(self, i: int) -> None:
        if self.mode[i] == CAPPED:
            self.n_capped -= 1
            self.sum_capped = self.sum_capped - self.cap[i] if self.n_capped else 0.0
        elif self.mode[i] == SHARED:
            self.n_shared -= 1
        self.mode[i] = DONE
        self.version[i] += 1

    def enter(self, i: int, rem: float, how: int) -> None:
        self.version[i] += 1
        self.mode[i] = how
        if how == CAPPED:
            self.tag[i] = self.t + rem / self.cap[i]
            heapq.heappush(self.capped_fin, (self.tag[i], self.version[i], i))
            heapq.heappush(self.capped_max, (-self.cap[i], self.version[i], i))
            self.n_capped += 1
            self.sum_capped += self.cap[i]
        else:
            self.tag[i] = self.V + rem
            heapq.heappush(self.shared_fin, (self.tag[i], self.version[i], i))
            heapq.heappush(self.shared_min, (self.cap[i], self.version[i], i))
            self.n_shared += 1

    def move(self, i: int, how: int) -> None:
        rem = self.remaining(i)
        self.leave(i)
        self.enter(i, rem, how)

    def rebalance(self) -> None:
        """Move flows between the groups until every capped flow's cap is below the fair level and
        every shared flow's cap above it (or, with no shared flow, the capped ones fit)."""
        while True:
            if self.n_shared == 0:
                big = self.top(self.capped_max, CAPPED)
                if big is not None and self.sum_capped > self.capacity * (1 + _EPS):
                    self.move(big[2], SHARED)
                    continue
                return
            fair = self.level()
            big = self.top(self.capped_max, CAPPED)
            if big is not None and -big[0] > fair * (1 + _EPS):
                self.move(big[2], SHARED)
                continue
            small = self.top(self.shared_min, SHARED)
            if small is not None and self.cap[small[2]] < fair * (1 - _EPS):
                self.move(small[2], CAPPED)
                continue
            return

    def advance(self, when: float) -> None:
        """Real time to ``when``; the shared group's virtual clock with it."""
        if self.n_shared:
            self.V += self.level() * (when - self.t)
        self.t = max(self.t, when)


ARRIVAL, FINISH, ABORT = 0, 1, 2  # event kinds, in the order they are taken at equal times


class _Sharing:
    """The event loop: arrivals in time order, the next finish of each group, and aborts."""

    def __init__(self, arrive: list[float], work: list[float], cap: list[float], abort: list[float],
                 capacity: float) -> None:
        self.arrive, self.work, self.abort = arrive, work, abort
        n = len(arrive)
        self.flows = _Flows(n, cap, capacity)
        self.finish = [math.inf] * n
        self.aborts = [(abort[i], i) for i in range(n) if abort[i] < math.inf]
        heapq.heapify(self.aborts)
        self.order = sorted(range(n), key=arrive.__getitem__)
        self.flows.t = arrive[self.order[0]] if n else 0.0
        self.next_arrival = 0

    def next_event(self) -> tuple[float, int, int] | None:
        """(time, kind, flow) of the earliest event, or None when nothing is left to happen."""
        flows = self.flows
        candidates = []
        if self.next_arrival < len(self.order):
            i = self.order[self.next_arrival]
            candidates.append((self.arrive[i], ARRIVAL, i))
        c = flows.top(flows.capped_fin, CAPPED)
        if c is not None:
            candidates.append((c[0], FINISH, c[2]))
        s = flows.top(flows.shared_fin, SHARED)
        if s is not None:
            fair = flows.level()
            candidates.append((flows.t + max(s[0] - flows.V, 0.0) / fair if fair > 0 else math.inf, FINISH, s[2]))
        while self.aborts and flows.mode[self.aborts[0][1]] == DONE:
            heapq.heappop(self.aborts)
        if self.aborts:
            candidates.append((self.aborts[0][0], ABORT, self.aborts[0][1]))
        if not candidates:
            return None
        event = min(candidates)
        return None if event[0] == math.inf else event

    def run(self) -> list[float]:
        flows = self.flows
        while (event := self.next_event()) is not None:
            when, kind, i = event
            flows.advance(when)
            if kind == ARRIVAL:
                self.next_arrival += 1
                if self.abort[i] <= when:
                    flows.mode[i] = DONE
                    continue
                if self.work[i] <= 0:
                    flows.mode[i] = DONE
                    self.finish[i] = when
                    continue
                flows.enter(i, self.work[i], SHARED)
            elif kind == FINISH:
                flows.leave(i)
                self.finish[i] = when
            else:
                heapq.heappop(self.aborts)
                if flows.mode[i] == PENDING:  # aborted before it arrives: the arrival is skipped above
                    continue
                flows.leave(i)
            flows.rebalance()
        return self.finish
