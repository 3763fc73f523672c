"""What both apps derive from the run config: the scenario, the data and the model (no state)."""

from __future__ import annotations

import functools
import json

import yaml

from fedgc.data import FederatedData, load_federated
from fedgc.scenario import Scenario, load_scenario, validate

SCENARIO_YAML = "scenario-yaml"  # the resolved scenario, inline (set by fedgc.simulate)
SCENARIO_PATH = "scenario"  # or a path to a scenario file (pyproject's [tool.flwr.app.config])
OUT_DIR = "out-dir"


def scenario_from_run_config(run_config: dict) -> Scenario:
    if SCENARIO_YAML in run_config:
        return _scenario_from_text(str(run_config[SCENARIO_YAML]))
    return load_scenario(str(run_config[SCENARIO_PATH]))


@functools.lru_cache(maxsize=8)
def _scenario_from_text(text: str) -> Scenario:
    return validate(yaml.safe_load(text))


@functools.lru_cache(maxsize=4)
def _federated_data(data_json: str, seed: int) -> FederatedData:
    from fedgc.data.config import DataConfig

    return load_federated(DataConfig.model_validate_json(data_json), seed)


def federated_data(scenario: Scenario) -> FederatedData:
    """The partitioned dataset, loaded once per process (every client of a run shares it)."""
    return _federated_data(json.dumps(scenario.data.model_dump(mode="json"), sort_keys=True), scenario.seed)
