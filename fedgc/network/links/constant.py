"""``constant``: fixed up/down throughput, RTT and optional uniform jitter.

Convention (documented in docs/network.md): a transfer of B bytes takes B·8/bw + RTT/2 + jitter,
i.e. serialization at the link rate plus one-way propagation delay.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from fedgc.network.links.base import Direction, Link, LinkInputs


class ConstantLink(Link):
    @classmethod
    def for_clients(cls, section: Any, inputs: LinkInputs) -> list[Link]:
        return [cls(float(up), float(down), inputs.rtt_ms, inputs.jitter_ms, rng)
                for up, down, rng in zip(inputs.up_mbps, inputs.down_mbps, inputs.rngs)]

    def __init__(self, up_mbps: float, down_mbps: float, rtt_ms: float = 0.0, jitter_ms: float = 0.0,
                 rng: np.random.Generator | None = None) -> None:
        super().__init__(rtt_ms, jitter_ms, rng)
        if not (up_mbps > 0 and down_mbps > 0):
            raise ValueError("link throughput must be > 0 Mbit/s")
        self.bps = {"up": up_mbps * 1e6, "down": down_mbps * 1e6}

    def serialize_time(self, start: float, nbytes: int, direction: Direction) -> float:
        return nbytes * 8.0 / self.bps[direction]

    def transfer_time(self, start: float, nbytes: int, direction: Direction) -> float:
        if self.jitter_s > 0:  # jitter > 0: Link.__init__ gave rng a generator (cast: it is not None)
            rng = cast(np.random.Generator, self.rng)
            return nbytes * 8.0 / self.bps[direction] + self.one_way_s + rng.uniform(0.0, self.jitter_s)
        return nbytes * 8.0 / self.bps[direction] + self.one_way_s

    def mean_bps(self, direction: Direction) -> float:
        return self.bps[direction]
