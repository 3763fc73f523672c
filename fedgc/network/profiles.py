"""Named network profiles (``network.profile``), calibrated to published figures.

Sources (see docs/network.md): 3G 1.5 Mbit/s down (OpenSignal 2015), 0.84 up (mahimahi Verizon EVDO
trace mean); LTE 13 down / 6 up (Huang et al., MobiSys'12), 55 ms RTT (OpenSignal 2019: 44–66 ms);
5G 166 down / 21 up (Ookla Q3 2021). ``wifi`` and ``ideal`` are illustrative, not measured.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinkProfile:
    up_mbps: float
    down_mbps: float
    rtt_ms: float
    source: str


PROFILES: dict[str, LinkProfile] = {
    "3g": LinkProfile(up_mbps=0.84, down_mbps=1.5, rtt_ms=150.0, source="OpenSignal 2015; mahimahi Verizon EVDO"),
    "lte": LinkProfile(up_mbps=6.0, down_mbps=13.0, rtt_ms=55.0, source="Huang et al. MobiSys'12; OpenSignal 2019"),
    "5g": LinkProfile(up_mbps=21.0, down_mbps=166.0, rtt_ms=30.0, source="Ookla Q3 2021"),
    "wifi": LinkProfile(up_mbps=20.0, down_mbps=50.0, rtt_ms=20.0, source="illustrative home WiFi"),
    "ideal": LinkProfile(up_mbps=10_000.0, down_mbps=10_000.0, rtt_ms=0.0, source="no network cost"),
}
