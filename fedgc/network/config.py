"""The ``network`` section of a scenario (pydantic; unknown keys are errors)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fedgc.network.profiles import PROFILES


class NetworkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: str = Field("lte", description="named link profile: " + ", ".join(PROFILES))
    up_mbps: float | None = Field(None, gt=0.0, description="override the profile's uplink")
    down_mbps: float | None = Field(None, gt=0.0, description="override the profile's downlink")
    rtt_ms: float | None = Field(None, ge=0.0, description="override the profile's round-trip time")
    jitter_ms: float = Field(0.0, ge=0.0)
    device_samples_per_s: float = Field(500.0, gt=0.0, description="device training speed")
    deadline_s: float | None = Field(None, gt=0.0, description="round deadline in simulated seconds")
    over_selection: float = Field(1.0, ge=1.0, description="select ceil(c*K) clients, keep the first K to finish")

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, profile: str) -> str:
        if profile not in PROFILES:
            raise ValueError(f"unknown network profile {profile!r}; known: {', '.join(PROFILES)}")
        return profile
