"""``trace``: replays throughput traces (one per direction), looping.

A transfer's serialization time integrates the trace's throughput from the moment it starts (trace
time = simulated time + this link's ``offset_s``, so clients sharing a file need not be in phase).
The uplink is either its own trace or the downlink trace scaled by ``up_scale``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedgc.network.links.base import Direction, Link, LinkInputs
from fedgc.network.piecewise import PeriodicRate


class TraceLink(Link):
    @classmethod
    def for_clients(cls, section: Any, inputs: LinkInputs) -> list[Link]:
        """Client i replays trace pair i mod len(down), from a random point of it with ``random_start``."""
        links: list[Link] = []
        for i, rng in enumerate(inputs.rngs):
            k = i % len(section.down)
            down_curve = inputs.trace(section.down[k])
            up_curve = inputs.trace(section.up[k]) if section.up else None
            draw = rng if rng is not None else np.random.default_rng(0)
            offset = float(draw.uniform(0, down_curve.period)) if section.random_start else 0.0
            links.append(cls(down_curve, up_curve, inputs.up_scale, inputs.rtt_ms, inputs.jitter_ms, rng, offset))
        return links

    def __init__(self, down: PeriodicRate, up: PeriodicRate | None = None, up_scale: float = 1.0,
                 rtt_ms: float = 0.0, jitter_ms: float = 0.0, rng: np.random.Generator | None = None,
                 offset_s: float = 0.0) -> None:
        super().__init__(rtt_ms, jitter_ms, rng)
        if up is None and not up_scale > 0:
            raise ValueError("trace link up_scale must be > 0")
        self.curves = {"down": down, "up": up if up is not None else down}
        self.scale = {"down": 1.0, "up": 1.0 if up is not None else up_scale}
        self.offset_s = offset_s

    def serialize_time(self, start: float, nbytes: int, direction: Direction) -> float:
        return self.curves[direction].duration(start + self.offset_s, nbytes * 8.0 / self.scale[direction])

    def mean_bps(self, direction: Direction) -> float:
        return self.curves[direction].mean_bps * self.scale[direction]
