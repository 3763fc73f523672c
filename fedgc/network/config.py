"""The ``network`` section of a scenario (pydantic; unknown keys are errors). Keys: docs/network.md.

Every number is finite and bounded: rates in [0.001, 1e6] Mbit/s, RTT and jitter at most one minute,
every duration at most 1e9 s (31 years), over-selection at most 10. A value outside these bounds is
not a network any run could learn from (docs/reliability.md, "Scenario input").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fedgc.fetch.hint import fetch_hint
from fedgc.network.flat_form import fold
from fedgc.network.profiles import PROFILES
from fedgc.network.sections import (
    AlwaysOnlineConfig,
    AvailabilityConfig,
    ConstantDeviceConfig,
    ConstantLinkConfig,
    DeviceConfig,
    IdealProtocolConfig,
    LinkConfig,
    ProtocolConfig,
)

MBPS: dict[str, Any] = {"gt": 0.0, "le": 1e6}  # up to 1 Tbit/s; at least MIN_MBPS (checked below, after "> 0")
MIN_MBPS = 0.001  # 1 kbit/s
MAX_DELAY_MS = 60_000.0
MAX_SECONDS = 1e9


class NetworkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # links
    profile: str = Field("lte", description="named link profile: " + ", ".join(PROFILES))
    # ignore[arg-type] below: without the pydantic.mypy plugin, mypy's dataclass_transform takes a positional
    # Field default (Field(None, ...)) for no default, so it sees ConstantLinkConfig() missing arguments
    link: LinkConfig = Field(default_factory=ConstantLinkConfig, description="link model (fedgc.network.links.LINKS)")  # type: ignore[arg-type]
    # ignore[misc] below: mypy's dataclass_transform cannot read **kwargs in a pydantic Field
    up_mbps: float | None = Field(None, **MBPS, description="override the profile's uplink")  # type: ignore[misc]
    down_mbps: float | None = Field(None, **MBPS, description="override the profile's downlink")  # type: ignore[misc]
    rtt_ms: float | None = Field(None, ge=0.0, le=MAX_DELAY_MS, description="override the profile's round-trip time")
    jitter_ms: float = Field(0.0, ge=0.0, le=MAX_DELAY_MS, description="uniform extra one-way delay in [0, jitter] per transfer")
    bandwidth_spread: float = Field(0.0, ge=0.0, le=3.0,
                                    description="lognormal sigma of per-client up/down rates around the profile")
    trace_dir: str | None = Field(None, description="directory relative trace/availability/capacity paths start from")
    # ignore[misc] below: as for up_mbps; ignore[arg-type]: as for link
    server_up_mbps: float | None = Field(None, **MBPS, description="server send capacity, shared by downloads")  # type: ignore[misc]
    server_down_mbps: float | None = Field(None, **MBPS, description="server receive capacity, shared by uploads")  # type: ignore[misc]
    device: DeviceConfig = Field(default_factory=ConstantDeviceConfig, description="training speed of the devices")  # type: ignore[arg-type]
    availability: AvailabilityConfig = Field(default_factory=AlwaysOnlineConfig, description="when clients are online")
    protocol: ProtocolConfig = Field(default_factory=IdealProtocolConfig,
                                     description="ideal: no protocol cost; flower: Flower's pull-based protocol "
                                     "(pick-up delay, request round trips, reply step)")
    # rounds
    deadline_s: float | None = Field(None, gt=0.0, le=MAX_SECONDS, description="round deadline in simulated seconds")
    over_selection: float = Field(1.0, ge=1.0, le=10.0, description="select ceil(c*K) clients, keep the first K to finish")
    max_phase_s: float = Field(1e7, gt=0.0, le=MAX_SECONDS,
                               description="longest phase (a client's compute, a wait for a client to come online) "
                               "the network model simulates; longer is an error naming the client")

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, profile: str) -> str:
        if profile not in PROFILES:
            raise ValueError(f"unknown network profile {profile!r}; known: {', '.join(PROFILES)}")
        return profile

    @field_validator("up_mbps", "down_mbps", "server_up_mbps", "server_down_mbps")
    @classmethod
    def _at_least_1_kbps(cls, mbps: float | None) -> float | None:
        if mbps is not None and mbps < MIN_MBPS:
            raise ValueError(f"must be at least {MIN_MBPS} Mbit/s (1 kbit/s), got {mbps}")
        return mbps

    def resolve(self, path: str) -> Path:
        """A scenario path, relative to ``trace_dir`` when that is set."""
        p = Path(path).expanduser()
        return p if p.is_absolute() or self.trace_dir is None else Path(self.trace_dir).expanduser() / p

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: object) -> object:
        return fold(data) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _consistent(self) -> NetworkConfig:
        bandwidth_file = getattr(self.link, "bandwidth_file", None)
        if bandwidth_file is not None and (self.up_mbps is not None or self.down_mbps is not None):
            raise ValueError("network.link.bandwidth_file: set either a bandwidth file or up_mbps/down_mbps, not both")
        for name in self.files():
            path = self.resolve(name)
            if path.exists() and not path.is_file():  # a stat only: a FIFO is never opened here
                raise ValueError(f"file {path}: not a regular file (a FIFO, socket or device is not read)")
            if not path.is_file():
                raise ValueError(f"file {path}: no such file{fetch_hint(path)}")
        return self

    def files(self) -> list[str]:
        """Every trace, capacity and availability file the section names."""
        link, device, availability = self.link, self.device, self.availability
        names = [*getattr(link, "down", []), *(getattr(link, "up", None) or []), getattr(link, "bandwidth_file", None),
                 getattr(device, "file", None), getattr(availability, "file", None)]
        return [name for name in names if name is not None]
