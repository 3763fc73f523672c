"""The parts of a run derived from its scenario alone (no state, no Flower): the partitioned data
(loaded once per process), the model, the per-client seed, the server optimizer, the density schedule.

Every app, engine, check and bench builds these here, so a scenario means one model and one seed
stream wherever it runs."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import torch

from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS, ServerOptimizer
from fedgc.compress.warmup import scheduled_density
from fedgc.data import FederatedData, load_federated
from fedgc.models import build_model
from fedgc.scenario.model import Scenario


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
