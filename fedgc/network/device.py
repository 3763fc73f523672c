"""A client's device: how fast it trains, in samples per second."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    samples_per_s: float

    def compute_time(self, samples: int) -> float:
        return samples / self.samples_per_s
