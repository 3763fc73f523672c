"""Build the run's network model from the scenario's ``network`` section."""

from __future__ import annotations

import numpy as np
import simpy

from fedgc.network.config import NetworkConfig
from fedgc.network.device import Device
from fedgc.network.links.constant import ConstantLink
from fedgc.network.profiles import PROFILES
from fedgc.network.timeline import ClientNetwork, NetworkModel


def build_network(env: simpy.Environment, config: NetworkConfig, node_ids: list[int],
                  rng: np.random.Generator) -> NetworkModel:
    """One link and one device per node, from the named profile plus the scenario's overrides."""
    profile = PROFILES[config.profile]
    clients = {}
    for node_id in node_ids:
        link = ConstantLink(
            up_mbps=config.up_mbps or profile.up_mbps,
            down_mbps=config.down_mbps or profile.down_mbps,
            rtt_ms=profile.rtt_ms if config.rtt_ms is None else config.rtt_ms,
            jitter_ms=config.jitter_ms,
            rng=np.random.default_rng(rng.integers(2**63)),
        )
        clients[node_id] = ClientNetwork(link=link, device=Device(config.device_samples_per_s))
    return NetworkModel(env, clients)
