"""The link interface: how long a transfer of ``nbytes`` takes when it starts at simulated time ``start``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal

Direction = Literal["up", "down"]


class Link(ABC):
    """A client's access link. Throughputs in bit/s, times in simulated seconds."""

    @abstractmethod
    def transfer_time(self, start: float, nbytes: int, direction: Direction) -> float:
        """Seconds from the first byte sent at ``start`` until the last byte is delivered (latency included)."""

    @abstractmethod
    def mean_bps(self, direction: Direction) -> float:
        """Long-run mean throughput, for reports and for the server's fair-share model."""
