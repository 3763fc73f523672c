"""The four choices of a ``network`` section, each a tagged union on ``name`` (docs/network.md):
``link`` (constant | gilbert_elliott | trace), ``device`` (constant | tier | file), ``availability``
(always | exponential | trace) and ``protocol`` (ideal | flower).

Each kind lists exactly the keys it reads, so a key that belongs to another kind is an unknown key
of this one: the schema says "only when ..." without a rule per key. A bare string (``link: trace``)
is the kind with its defaults.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fedgc.network.compute import DEVICE_TIERS

MAX_SECONDS = 1e9


class _Kind(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# links --------------------------------------------------------------------------------------------

class ConstantLinkConfig(_Kind):
    name: Literal["constant"] = "constant"
    bandwidth_file: str | None = Field(None, description="FedScale-style CSV: per-client dl_kbps/ul_kbps")


class GilbertElliottLinkConfig(_Kind):
    name: Literal["gilbert_elliott"] = "gilbert_elliott"
    mean_good_s: float = Field(10.0, gt=0.0, le=MAX_SECONDS, description="mean time in good (s)")
    mean_bad_s: float = Field(2.0, gt=0.0, le=MAX_SECONDS, description="mean time in bad (s)")
    bad_factor: float = Field(0.1, ge=0.0, le=1.0, description="bad-state throughput / good-state throughput")
    good_loss: float = Field(0.0, ge=0.0, lt=1.0, description="packet loss in good (goodput x (1-loss))")
    bad_loss: float = Field(0.05, ge=0.0, le=1.0, description="packet loss in bad")
    bandwidth_file: str | None = Field(None, description="FedScale-style CSV: per-client dl_kbps/ul_kbps")


class TraceLinkConfig(_Kind):
    name: Literal["trace"] = "trace"
    down: list[str] = Field(min_length=1, description="downlink trace files, round-robin per client")
    up: list[str] | None = Field(None, description="uplink trace files (paired with down)")
    format: Literal["mahimahi", "pensieve", "lumos"] = "pensieve"
    unit: Literal["Mbit/s", "MByte/s", "kbit/s"] | None = Field(
        None, description="throughput column unit (default: Mbit/s pensieve, MByte/s lumos)")
    random_start: bool = Field(True, description="each client starts its trace at a random point")

    @model_validator(mode="after")
    def _paired(self) -> TraceLinkConfig:
        if self.up is not None and len(self.up) != len(self.down):
            raise ValueError("network.link.up: must list as many files as link.down")
        if self.format == "mahimahi" and self.unit is not None:
            raise ValueError("network.link.unit: does not apply to mahimahi traces (1500-byte packets per ms)")
        return self


LinkConfig = Annotated[ConstantLinkConfig | GilbertElliottLinkConfig | TraceLinkConfig, Field(discriminator="name")]


# devices ------------------------------------------------------------------------------------------

class ConstantDeviceConfig(_Kind):
    name: Literal["constant"] = "constant"
    samples_per_s: float = Field(500.0, ge=0.001, le=1e9, description="training speed of every device")


TierName = Literal["low", "mid", "high", "mixed"]
# cast: typeshed declares no __args__ on a Literal alias (it is there at runtime)
assert set(cast(Any, TierName).__args__) == {*DEVICE_TIERS, "mixed"}, "TierName lists fedgc.network.compute.DEVICE_TIERS"


class TierDeviceConfig(_Kind):
    name: Literal["tier"] = "tier"
    tier: TierName = Field(description="named speed tier (mixed: each client draws one)")


class FileDeviceConfig(_Kind):
    name: Literal["file"] = "file"
    file: str = Field(description="FedScale-style CSV: per-client computation_ms_per_sample")
    scale: float = Field(3.0, ge=0.001, le=1000.0, description="training cost / the file's per-sample latency")


DeviceConfig = Annotated[ConstantDeviceConfig | TierDeviceConfig | FileDeviceConfig, Field(discriminator="name")]


# availability -------------------------------------------------------------------------------------

class AlwaysOnlineConfig(_Kind):
    name: Literal["always"] = "always"


class ExponentialAvailabilityConfig(_Kind):
    name: Literal["exponential"] = "exponential"
    mean_on_s: float = Field(1800.0, gt=0.0, le=MAX_SECONDS, description="mean online time")
    mean_off_s: float = Field(600.0, gt=0.0, le=MAX_SECONDS, description="mean offline time")


class TraceAvailabilityConfig(_Kind):
    name: Literal["trace"] = "trace"
    file: str = Field(description="CSV client,start_s,end_s of online intervals")
    period_s: float | None = Field(None, gt=0.0, le=MAX_SECONDS, description="repeat the file every ...")


AvailabilityConfig = Annotated[AlwaysOnlineConfig | ExponentialAvailabilityConfig | TraceAvailabilityConfig,
                               Field(discriminator="name")]


# messaging protocol (fedgc/network/protocol.py) ---------------------------------------------------

class IdealProtocolConfig(_Kind):
    name: Literal["ideal"] = "ideal"


class FlowerProtocolConfig(_Kind):
    name: Literal["flower"] = "flower"
    pull_interval_s: float = Field(3.0, ge=0.0, le=3600.0, description="a SuperNode's sleep between pulls")
    # Both measured on the shaped deployment for fedgc's messages (docs/sim-to-real.md); until then 3 and 2.
    requests_down: int = Field(6, ge=0, le=10_000, description="request round trips per download")
    requests_up: int = Field(1, ge=0, le=10_000, description="request round trips per upload")
    reply_poll_s: float = Field(0.05, ge=0.0, le=3600.0, description="the server's reply collection step "
                                "(fedgc's loop 0.05 s; Flower's send_and_receive 3 s)")
    # fedgc's server collects each reply as its last object arrives (fedgc.flower.server.superlink_grid): 0.
    # A ServerApp on Flower's own grid retries a missing object after 1 s, doubling, at most 10 s apart.
    pull_backoff_s: float = Field(0.0, ge=0.0, le=3600.0, description="first retry of a reply object not yet "
                                  "arrived (doubling; 0: collected as it arrives, fedgc's server)")
    pull_backoff_cap_s: float = Field(10.0, ge=0.0, le=3600.0, description="longest wait between retries")


ProtocolConfig = Annotated[IdealProtocolConfig | FlowerProtocolConfig, Field(discriminator="name")]

# section: (its kinds, the kind when the section is not given)
SECTIONS: dict[str, tuple[dict[str, type[_Kind]], str]] = {
    "link": ({"constant": ConstantLinkConfig, "gilbert_elliott": GilbertElliottLinkConfig,
              "trace": TraceLinkConfig}, "constant"),
    "device": ({"constant": ConstantDeviceConfig, "tier": TierDeviceConfig, "file": FileDeviceConfig}, "constant"),
    "availability": ({"always": AlwaysOnlineConfig, "exponential": ExponentialAvailabilityConfig,
                      "trace": TraceAvailabilityConfig}, "always"),
    "protocol": ({"ideal": IdealProtocolConfig, "flower": FlowerProtocolConfig}, "ideal"),
}
