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
    n = len(arrive)
    finish = [math.inf] * n
    mode = [PENDING] * n
    version = [0] * n
    tag = [0.0] * n  # CAPPED: real finish time; SHARED: virtual finish tag
    capped_fin: list[tuple[float, int, int]] = []
    capped_max: list[tuple[float, int, int]] = []
    shared_fin: list[tuple[float, int, int]] = []
    shared_min: list[tuple[float, int, int]] = []
    aborts = [(abort[i], i) for i in range(n) if abort[i] < math.inf]
    heapq.heapify(aborts)
    order = sorted(range(n), key=arrive.__getitem__)
    st = {"t": arrive[order[0]] if n else 0.0, "V": 0.0, "sum_capped": 0.0, "n_capped": 0, "n_shared": 0}

    def top(heap: list[tuple[float, int, int]], wanted: int) -> tuple[float, int, int] | None:
        while heap and (mode[heap[0][2]] != wanted or version[heap[0][2]] != heap[0][1]):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def level() -> float:
        return (capacity - st["sum_capped"]) / st["n_shared"] if st["n_shared"] else math.inf

    def remaining(i: int) -> float:
        if mode[i] == CAPPED:
            return max(cap[i] * (tag[i] - st["t"]), 0.0)
        return max(tag[i] - st["V"], 0.0)

    def leave(i: int) -> None:
        if mode[i] == CAPPED:
            st["n_capped"] -= 1
            st["sum_capped"] = st["sum_capped"] - cap[i] if st["n_capped"] else 0.0
        elif mode[i] == SHARED:
            st["n_shared"] -= 1
        mode[i] = DONE
        version[i] += 1

    def enter(i: int, rem: float, how: int) -> None:
        version[i] += 1
        mode[i] = how
        if how == CAPPED:
            tag[i] = st["t"] + rem / cap[i]
            heapq.heappush(capped_fin, (tag[i], version[i], i))
            heapq.heappush(capped_max, (-cap[i], version[i], i))
            st["n_capped"] += 1
            st["sum_capped"] += cap[i]
        else:
            tag[i] = st["V"] + rem
            heapq.heappush(shared_fin, (tag[i], version[i], i))
            heapq.heappush(shared_min, (cap[i], version[i], i))
            st["n_shared"] += 1

    def move(i: int, how: int) -> None:
        rem = remaining(i)
        leave(i)
        enter(i, rem, how)

    def rebalance() -> None:
        while True:
            if st["n_shared"] == 0:
                big = top(capped_max, CAPPED)
                if big is not None and st["sum_capped"] > capacity * (1 + _EPS):
                    move(big[2], SHARED)
                    continue
                return
            fair = level()
            big = top(capped_max, CAPPED)
            if big is not None and -big[0] > fair * (1 + _EPS):
                move(big[2], SHARED)
                continue
            small = top(shared_min, SHARED)
            if small is not None and cap[small[2]] < fair * (1 - _EPS):
                move(small[2], CAPPED)
                continue
            return

    next_arrival = 0
    while True:
        candidates = []
        if next_arrival < n:
            candidates.append((arrive[order[next_arrival]], 0, order[next_arrival]))
        c = top(capped_fin, CAPPED)
        if c is not None:
            candidates.append((c[0], 1, c[2]))
        s = top(shared_fin, SHARED)
        if s is not None:
            fair = level()
            candidates.append((st["t"] + max(s[0] - st["V"], 0.0) / fair if fair > 0 else math.inf, 1, s[2]))
        while aborts and mode[aborts[0][1]] == DONE:
            heapq.heappop(aborts)
        if aborts:
            candidates.append((aborts[0][0], 2, aborts[0][1]))
        if not candidates:
            return finish
        when, kind, i = min(candidates)
        if when == math.inf:
            return finish
        if st["n_shared"]:
            st["V"] += level() * (when - st["t"])
        st["t"] = max(st["t"], when)
        if kind == 0:
            next_arrival += 1
            if abort[i] <= when:
                mode[i] = DONE
                continue
            if work[i] <= 0:
                mode[i] = DONE
                finish[i] = when
                continue
            enter(i, work[i], SHARED)
        elif kind == 1:
            leave(i)
            finish[i] = when
        else:
            heapq.heappop(aborts)
            if mode[i] == PENDING:  # aborted before it arrives: the arrival is skipped above
                continue
            leave(i)
        rebalance()
