"""The ``network`` section of a scenario (pydantic; unknown keys are errors). Keys: docs/network.md.

Every number is finite and bounded: rates in [0.001, 1e6] Mbit/s, RTT and jitter at most one minute,
every duration at most 1e9 s (31 years), over-selection at most 10. A value outside these bounds is
not a network any run could learn from (docs/reliability.md, "Scenario input").
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fedgc.network.device import DEVICE_TIERS
from fedgc.network.profiles import PROFILES

MBPS = {"gt": 0.0, "le": 1e6}  # up to 1 Tbit/s; at least MIN_MBPS (checked below, after "> 0")
MIN_MBPS = 0.001  # 1 kbit/s
MAX_DELAY_MS = 60_000.0
MAX_SECONDS = 1e9

LinkKind = Literal["constant", "gilbert_elliott", "trace"]


class NetworkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # links
    profile: str = Field("lte", description="named link profile: " + ", ".join(PROFILES))
    link: LinkKind = Field("constant", description="link model (fedgc.network.links.LINKS)")
    up_mbps: float | None = Field(None, **MBPS, description="override the profile's uplink")
    down_mbps: float | None = Field(None, **MBPS, description="override the profile's downlink")
    rtt_ms: float | None = Field(None, ge=0.0, le=MAX_DELAY_MS, description="override the profile's round-trip time")
    jitter_ms: float = Field(0.0, ge=0.0, le=MAX_DELAY_MS, description="uniform extra one-way delay in [0, jitter] per transfer")
    bandwidth_spread: float = Field(0.0, ge=0.0, le=3.0,
                                    description="lognormal sigma of per-client up/down rates around the profile")
    bandwidth_file: str | None = Field(None, description="FedScale-style CSV: per-client dl_kbps/ul_kbps")
    ge_mean_good_s: float = Field(10.0, gt=0.0, le=MAX_SECONDS, description="Gilbert-Elliott mean time in good (s)")
    ge_mean_bad_s: float = Field(2.0, gt=0.0, le=MAX_SECONDS, description="Gilbert-Elliott mean time in bad (s)")
    ge_bad_factor: float = Field(0.1, ge=0.0, le=1.0, description="bad-state throughput / good-state throughput")
    ge_good_loss: float = Field(0.0, ge=0.0, lt=1.0, description="packet loss in good (goodput x (1-loss))")
    ge_bad_loss: float = Field(0.05, ge=0.0, le=1.0, description="packet loss in bad")
    trace_down: list[str] = Field(default_factory=list, description="downlink trace files, round-robin per client")
    trace_up: list[str] | None = Field(None, description="uplink trace files (paired with trace_down)")
    trace_format: Literal["mahimahi", "pensieve", "lumos"] = "pensieve"
    trace_unit: Literal["Mbit/s", "MByte/s", "kbit/s"] | None = Field(
        None, description="throughput column unit (default: Mbit/s pensieve, MByte/s lumos)")
    trace_dir: str | None = Field(None, description="directory relative trace/availability/capacity paths start from")
    trace_random_start: bool = Field(True, description="each client starts its trace at a random point")
    server_up_mbps: float | None = Field(None, **MBPS, description="server send capacity, shared by downloads")
    server_down_mbps: float | None = Field(None, **MBPS, description="server receive capacity, shared by uploads")
    # devices
    device_samples_per_s: float = Field(500.0, ge=0.001, le=1e9, description="device training speed")
    device_tier: str | None = Field(None, description="named speed tier: " + ", ".join([*DEVICE_TIERS, "mixed"]))
    device_file: str | None = Field(None, description="FedScale-style CSV: per-client computation_ms_per_sample")
    device_file_scale: float = Field(3.0, ge=0.001, le=1000.0, description="training cost / the file's per-sample latency")
    # availability
    availability: Literal["always", "exponential", "trace"] = "always"
    mean_on_s: float = Field(1800.0, gt=0.0, le=MAX_SECONDS, description="exponential availability: mean online time")
    mean_off_s: float = Field(600.0, gt=0.0, le=MAX_SECONDS, description="exponential availability: mean offline time")
    availability_file: str | None = Field(None, description="CSV client,start_s,end_s of online intervals")
    availability_period_s: float | None = Field(None, gt=0.0, le=MAX_SECONDS, description="repeat the availability file every ...")
    # messaging protocol (fedgc/network/protocol.py)
    protocol: Literal["ideal", "flower"] = Field("ideal", description="ideal: no protocol cost; flower: Flower's "
                                                 "pull-based protocol (pick-up delay, request round trips, reply step)")
    pull_interval_s: float = Field(3.0, ge=0.0, le=3600.0, description="flower: a SuperNode's sleep between pulls")
    requests_down: int = Field(3, ge=0, le=10_000, description="flower: request round trips per download")
    requests_up: int = Field(2, ge=0, le=10_000, description="flower: request round trips per upload")
    reply_poll_s: float = Field(0.05, ge=0.0, le=3600.0, description="flower: the server's reply collection step "
                                "(fedgc's loop 0.05 s; Flower's send_and_receive 3 s)")
    pull_backoff_s: float = Field(1.0, ge=0.0, le=3600.0, description="flower: first retry of a reply object "
                                  "not yet arrived (doubling)")
    pull_backoff_cap_s: float = Field(10.0, ge=0.0, le=3600.0, description="flower: longest wait between retries")
    # rounds
    deadline_s: float | None = Field(None, gt=0.0, le=MAX_SECONDS, description="round deadline in simulated seconds")
    over_selection: float = Field(1.0, ge=1.0, le=10.0, description="select ceil(c*K) clients, keep the first K to finish")

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

    @field_validator("device_tier")
    @classmethod
    def _known_tier(cls, tier: str | None) -> str | None:
        if tier is not None and tier not in DEVICE_TIERS and tier != "mixed":
            raise ValueError(f"unknown device tier {tier!r}; known: {', '.join([*DEVICE_TIERS, 'mixed'])}")
        return tier

    def resolve(self, path: str) -> Path:
        """A scenario path, relative to ``trace_dir`` when that is set."""
        p = Path(path).expanduser()
        return p if p.is_absolute() or self.trace_dir is None else Path(self.trace_dir).expanduser() / p

    @model_validator(mode="after")
    def _consistent(self) -> NetworkConfig:
        if self.link == "trace" and not self.trace_down:
            raise ValueError("trace_down must list at least one trace file when link is trace")
        if self.link != "trace" and (self.trace_down or self.trace_up):
            raise ValueError("trace_down/trace_up are only used when link is trace")
        if self.trace_up is not None and len(self.trace_up) != len(self.trace_down):
            raise ValueError("trace_up must list as many files as trace_down")
        if self.trace_format == "mahimahi" and self.trace_unit is not None:
            raise ValueError("trace_unit does not apply to mahimahi traces (1500-byte packets per ms)")
        if self.bandwidth_file is not None and (self.up_mbps is not None or self.down_mbps is not None):
            raise ValueError("set either bandwidth_file or up_mbps/down_mbps, not both")
        if self.bandwidth_file is not None and self.link == "trace":
            raise ValueError("bandwidth_file applies to constant and gilbert_elliott links, not trace")
        if self.device_tier is not None and self.device_file is not None:
            raise ValueError("set either device_tier or device_file, not both")
        if (self.availability == "trace") != (self.availability_file is not None):
            raise ValueError("availability_file is required exactly when availability is trace")
        if self.availability_period_s is not None and self.availability != "trace":
            raise ValueError("availability_period_s only applies when availability is trace")
        if self.protocol == "ideal":
            # A resolved scenario.yaml lists every key with its default: only a changed value is an error.
            changed = [k for k in ("pull_interval_s", "requests_down", "requests_up", "reply_poll_s", "pull_backoff_s",
                                   "pull_backoff_cap_s")
                       if k in self.model_fields_set and getattr(self, k) != type(self).model_fields[k].default]
            if changed:
                raise ValueError(f"{changed[0]} only applies when protocol is flower")
        files = [*self.trace_down, *(self.trace_up or []), self.bandwidth_file, self.device_file,
                 self.availability_file]
        for name in files:
            if name is not None and not self.resolve(name).is_file():
                raise ValueError(f"file {self.resolve(name)}: no such file")
        return self
