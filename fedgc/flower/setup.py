"""What both apps derive from the run config: the scenario, the data and the model (no state)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import yaml

from fedgc.data import FederatedData, load_federated
from fedgc.scenario import Scenario, load_scenario, validate

# Run-config keys; every one has a default in pyproject's [tool.flwr.app.config], since `flwr run`
# only accepts overrides of declared keys (an empty string means "not set").
SCENARIO_YAML = "scenario-yaml"  # the resolved scenario, inline (set by fedgc.simulate)
SCENARIO_PATH = "scenario"  # or a path to a scenario file
OUT_DIR = "out-dir"  # where the ServerApp writes metrics.jsonl, summary.json, plots, model.pt
QUIET = "quiet"  # no progress bar
NODE_WAIT_S = "node-wait-s"  # how long the ServerApp waits for SuperNodes to connect


def scenario_from_run_config(run_config: dict) -> Scenario:
    if run_config.get(SCENARIO_YAML):
        return _scenario_from_text(str(run_config[SCENARIO_YAML]))
    return load_scenario(str(_scenario_path(str(run_config[SCENARIO_PATH]))))


def _scenario_path(path: str) -> Path:
    """A relative scenario path is tried from the working directory, then from the app folder: on
    Flower's runtimes the app runs from its installed FAB, which holds ``fedgc/`` and ``scenarios/``."""
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists():
        return candidate
    in_app = Path(__file__).resolve().parents[2] / candidate
    return in_app if in_app.exists() else candidate


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
