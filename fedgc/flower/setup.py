"""The run-config keys both apps read, and the scenario they name: Flower's run config (``UserConfig``,
``Context.run_config``) to fedgc's ``Scenario`` (no state; the parts derived from the scenario are in
``fedgc.core.parts``)."""

from __future__ import annotations

import functools
from pathlib import Path

from flwr.app import UserConfig

from fedgc.flower.keys import NODE_WAIT_S, OUT_DIR, QUIET, SCENARIO_PATH, SCENARIO_YAML  # noqa: F401 — defined in keys.py
from fedgc.scenario import Scenario, load_scenario, validate
from fedgc.yaml12 import load as yaml12_load


def scenario_from_run_config(run_config: UserConfig) -> Scenario:
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
    return validate(yaml12_load(text))
