"""The link interface: how long a transfer of ``nbytes`` takes when it starts at simulated time ``start``.

A transfer's duration = serialization (the bits through the link's throughput, integrated from
``start``) + one-way latency (RTT/2) + jitter. The round timeline needs the two parts separately
when the server's bandwidth is shared (only serialization competes for it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

Direction = Literal["up", "down"]


@dataclass(frozen=True)
class LinkInputs:
    """What the network builder derives for the run's clients before their links are built: per-client
    rates (Mbit/s, after profile, capacity file and spread), the RTT and jitter, one generator per
    client (None where a link draws nothing), the up/down ratio of the profile, and ``trace(name)``,
    which reads a trace file once per run."""

    up_mbps: np.ndarray
    down_mbps: np.ndarray
    rtt_ms: float
    jitter_ms: float
    rngs: list[np.random.Generator | None]
    up_scale: float
    trace: Callable[[str], Any]


class Link(ABC):
    """A client's access link. Throughputs in bit/s, times in simulated seconds. A link kind is a
    subclass with ``for_clients``, listed in ``fedgc.network.links.LINKS`` under its section's name."""

    @classmethod
    @abstractmethod
    def for_clients(cls, section: Any, inputs: LinkInputs) -> list[Link]:
        """One link per client from the scenario's ``network.link`` section (in client order)."""

    def __init__(self, rtt_ms: float = 0.0, jitter_ms: float = 0.0, rng: np.random.Generator | None = None) -> None:
        if rtt_ms < 0 or jitter_ms < 0:
            raise ValueError("link rtt_ms and jitter_ms must be >= 0")
        self.one_way_s = rtt_ms / 2000.0
        self.jitter_s = jitter_ms / 1000.0
        self.rng = rng if rng is not None or jitter_ms == 0 else np.random.default_rng(0)

    @abstractmethod
    def serialize_time(self, start: float, nbytes: int, direction: Direction) -> float:
        """Seconds for ``nbytes`` to pass through the link's throughput, first bit sent at ``start``."""

    @abstractmethod
    def mean_bps(self, direction: Direction) -> float:
        """Long-run mean throughput (goodput), for reports."""

    def forget_before(self, t: float) -> None:  # noqa: B027 — optional: most links hold nothing to drop
        """The simulation will not ask about times before ``t`` again: a link that generates its rate
        curve as time goes (``gilbert_elliott``) drops what lies behind. Others hold nothing to drop."""

    def latency(self) -> float:
        """One-way delay of one transfer: RTT/2 plus a fresh uniform jitter draw in [0, jitter]."""
        if self.jitter_s > 0:  # jitter > 0: __init__ gave rng a generator (cast: it is not None)
            return self.one_way_s + cast(np.random.Generator, self.rng).uniform(0.0, self.jitter_s)
        return self.one_way_s

    def transfer_time(self, start: float, nbytes: int, direction: Direction) -> float:
        """Seconds from the first byte sent at ``start`` until the last byte is delivered (latency included)."""
        return self.serialize_time(start, nbytes, direction) + self.latency()
