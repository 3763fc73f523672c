"""``python -m fedgc.simulate SCENARIO --check``: build everything a run needs, train nothing.

Loading the data and partitioning it, building the model and building every client's link, device
and availability process reads every file the scenario names (dataset, traces, capacity and
availability files), so a scenario that passes the check fails later only for reasons of training
itself (divergence, running out of memory).
"""

from __future__ import annotations

import numpy as np
import simpy

from fedgc.data import FederatedData
from fedgc.models import parameter_count
from fedgc.network.build import build_network
from fedgc.run.parts import build_model_for
from fedgc.scenario import Scenario
from fedgc.training import samples_asked


def _check_clock(scenario: Scenario, data: FederatedData, network) -> None:
    """Simulated quantities that would run forever are refused now: a device slower than
    ``network.max_phase_s`` for one round's samples, a population that first comes online later than it."""
    bound, samples = scenario.network.max_phase_s, samples_asked(scenario, data)
    for node, client in network.clients.items():
        seconds = client.device.compute_time(samples)
        if not seconds <= bound:
            raise ValueError(f"client {node}: one round's compute ({samples} samples) would last {seconds:.3g} s of "
                             f"simulated time, more than network.max_phase_s = {bound:g}")
    first = min((client.availability.next_on(0.0) for client in network.clients.values()), default=0.0)
    if not first <= bound:
        raise ValueError(f"no client comes online before {first:.3g} s of simulated time, later than "
                         f"network.max_phase_s = {bound:g}")


def check_scenario(scenario: Scenario, data: FederatedData) -> str:
    """A one-line description of what the run would train on; ``ValueError``/``OSError`` if unusable."""
    model = build_model_for(scenario, data)
    nodes = list(range(1, len(data.partitions) + 1))
    network = build_network(simpy.Environment(), scenario.network, nodes, np.random.default_rng(scenario.seed))
    _check_clock(scenario, data, network)
    return (f"{scenario.name}: {len(nodes)} clients, {sum(len(p) for p in data.partitions)} train samples, "
            f"model {scenario.model.name} ({parameter_count(model):,} parameters), "
            f"compression {scenario.compression.name}, downlink {scenario.downlink.name}, network {scenario.network.profile}/{scenario.network.link.name}")
