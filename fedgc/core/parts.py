"""The parts of a run derived from its scenario alone (no Flower): the partitioned data (loaded once
per process), the model, the per-client seed, the server optimizer, the density schedule, and
``build_run``: all of a run's Flower-free parts, built in one documented order.

Every app, engine, check and bench builds these here, so a scenario means one model and one seed
stream wherever it runs."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS, ServerOptimizer
from fedgc.compress.warmup import scheduled_density
from fedgc.data import FederatedData, load_federated
from fedgc.models import build_model
from fedgc.scenario.model import Scenario

if TYPE_CHECKING:
    from fedgc.network.timeline import NetworkModel


@functools.lru_cache(maxsize=4)
def _federated_data(data_json: str, seed: int) -> FederatedData:
    from fedgc.data.config import DataConfig

    return load_federated(DataConfig.model_validate_json(data_json), seed)


def federated_data(scenario: Scenario) -> FederatedData:
    """The partitioned dataset, loaded once per process (every client of a run shares it)."""
    return _federated_data(json.dumps(scenario.data.model_dump(mode="json"), sort_keys=True), scenario.seed)


def build_model_for(scenario: Scenario, data: FederatedData | None = None) -> torch.nn.Module:
    """The scenario's model with its initial weights (a function of the seed: every process agrees)."""
    data = data if data is not None else federated_data(scenario)
    return build_model(scenario.model.name, data.input_shape, data.num_classes, scenario.seed,
                       options=scenario.model.options)


def client_seed(seed: int, client: int, server_round: int) -> int:
    """The seed of one client's stream in one round: its training order and its compressor's draws
    (``client`` is the partition), or the server's downlink draws for that node."""
    return (seed * 1_000_003 + client * 7919 + server_round) % (2**63)


def server_optimizer(scenario: Scenario) -> ServerOptimizer:
    """The scenario's ``strategy.server_optimizer``, built from its strategy section."""
    return SERVER_OPTIMIZERS[scenario.strategy.server_optimizer].from_strategy(scenario.strategy)


def density_schedule(scenario: Scenario) -> Callable[[int], float]:
    """Round → the density sent to clients (warm-up, then ``compression.density``)."""
    return lambda server_round: scheduled_density(scenario.compression, server_round)


@dataclass(frozen=True)
class SelectionPolicy:
    fraction: float
    over_selection: float = 1.0
    min_clients: int = 1
    retries: int = 0  # attempts after the first for a round with fewer than min_clients updates

    def wanted(self, total_nodes: int) -> int:
        """K: updates aggregated per round."""
        return max(1, round(self.fraction * total_nodes))

    def to_select(self, total_nodes: int) -> int:
        return math.ceil(self.over_selection * self.wanted(total_nodes))


@dataclass
class RunParts:
    """A run's Flower-free parts (``build_run``); the round loop adds its Flower stages around them."""

    data: FederatedData
    device: torch.device
    model: torch.nn.Module  # the server's copy, on ``device``: evaluation
    weights: dict[str, torch.Tensor]  # the initial global model, on the CPU: sent from there
    shapes: dict[str, tuple[int, ...]]
    nodes: list[int]
    network: NetworkModel  # the simulated network (a deployment's measured exchange ignores it)
    policy: SelectionPolicy
    keep_first: int | None  # over-selection: the first K replies are kept
    max_samples: int  # the most samples a train message asks any client for
    optimizer: ServerOptimizer
    selection_rng: np.random.Generator  # the strategy's draws: which online clients a round selects


def build_run(scenario: Scenario, nodes: list[int]) -> RunParts:
    """The parts of a run over ``nodes``, built in this order, which is part of the seed's meaning:

    1. the data (partitioned with ``seed``), then the device (a ``DeviceError`` before anything runs);
    2. the model, its initial weights drawn from ``seed`` (torch's generator);
    3. one ``numpy`` generator from ``seed``, whose first draw seeds the network (latencies, dropouts,
       traces) and whose second seeds the strategy's selection.

    Adding a draw before either of the two, or swapping them, changes every seeded result:
    tests/test_build_order.py pins each part's first draws, so such a change fails until it is made on
    purpose (and noted in CHANGELOG.md: old seeds no longer reproduce old results)."""
    import simpy  # a ClientApp imports this module for client_seed: the server's parts load when built

    from fedgc.execution.device import resolve_device
    from fedgc.execution.training import samples_asked
    from fedgc.network.build import build_network

    data = federated_data(scenario)
    device = resolve_device(scenario.device)
    model = build_model_for(scenario, data)
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.to(device)
    rng = np.random.default_rng(scenario.seed)
    network = build_network(simpy.Environment(), scenario.network, nodes, np.random.default_rng(rng.integers(2**63)))
    s = scenario.strategy
    policy = SelectionPolicy(s.fraction, scenario.network.over_selection, s.min_clients,
                             retries=s.max_retries if s.too_few == "retry" else 0)
    return RunParts(data=data, device=device, model=model, weights=weights,
                    shapes={k: tuple(v.shape) for k, v in weights.items()}, nodes=nodes, network=network,
                    policy=policy, keep_first=policy.wanted(len(nodes)) if scenario.network.over_selection > 1.0 else None,
                    max_samples=samples_asked(scenario, data), optimizer=server_optimizer(scenario),
                    selection_rng=np.random.default_rng(rng.integers(2**63)))
