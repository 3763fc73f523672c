"""The mobile network and device model on a simpy clock (no Flower imports here). See docs/network.md."""

from fedgc.network.build import build_network
from fedgc.network.config import NetworkConfig
from fedgc.network.links import LINKS
from fedgc.network.profiles import PROFILES
from fedgc.network.timeline import ClientJob, ClientNetwork, ClientTiming, NetworkModel, RoundTimeline

__all__ = ["LINKS", "PROFILES", "ClientJob", "ClientNetwork", "ClientTiming", "NetworkConfig", "NetworkModel",
           "RoundTimeline", "build_network"]
