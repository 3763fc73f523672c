"""``constant``: fixed up/down throughput, RTT and optional uniform jitter.

Convention (documented in docs/network.md): a transfer of B bytes takes B·8/bw + RTT/2 + jitter,
i.e. serialization at the link rate plus one-way propagation delay.
"""

from __future__ import annotations

import numpy as np

from fedgc.network.links.base import Direction, Link


class ConstantLink(Link):
    def __init__(self, up_mbps: float, down_mbps: float, rtt_ms: float = 0.0, jitter_ms: float = 0.0,
                 rng: np.random.Generator | None = None) -> None:
        if up_mbps <= 0 or down_mbps <= 0:
            raise ValueError("link throughput must be > 0 Mbit/s")
        self.bps = {"up": up_mbps * 1e6, "down": down_mbps * 1e6}
        self.one_way_s = rtt_ms / 2000.0
        self.jitter_s = jitter_ms / 1000.0
        self.rng = rng if rng is not None else np.random.default_rng(0)

    def transfer_time(self, start: float, nbytes: int, direction: Direction) -> float:
        jitter = self.rng.uniform(0.0, self.jitter_s) if self.jitter_s > 0 else 0.0
        return nbytes * 8.0 / self.bps[direction] + self.one_way_s + jitter

    def mean_bps(self, direction: Direction) -> float:
        return self.bps[direction]
