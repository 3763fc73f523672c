"""The run-config keys both apps read, and the scenario they name: Flower's run config (``UserConfig``,
``Context.run_config``) to fedgc's ``Scenario`` (no state; the parts derived from the scenario are in
``fedgc.core.parts``)."""

from __future__ import annotations

import functools
from pathlib import Path

from flwr.app import Context, UserConfig

from fedgc.flower.client_checks import ClientRefusal
from fedgc.flower.keys import NODE_WAIT_S, OUT_DIR, PLUGINS, QUIET, SCENARIO_PATH, SCENARIO_YAML  # noqa: F401 — defined in keys.py
from fedgc.plugins.import_paths import node_policy
from fedgc.scenario.model import Scenario, load_scenario, validate
from fedgc.scenario.yaml12 import load as yaml12_load


def node_scenario(context: Context) -> Scenario:
    """The run config's scenario as a ClientApp reads it (a simulation's node without ``data-dir``):
    with fedgc's bounded YAML reader (a billion-laughs document or 50,000 levels of nesting are refused
    at once), and under the node's policy (node config ``plugins``, ``node_policy``): an import path
    to a module its operator did not list, and a ``fedgc.plugins`` entry point of one, is refused,
    never imported. A scenario the node cannot read is ``bad-run-config``, in one line."""
    import yaml

    try:
        with node_policy(context.node_config.get(PLUGINS)):
            return scenario_from_run_config(context.run_config)
    except (ValueError, TypeError, OSError, RecursionError, yaml.YAMLError) as err:
        first = str(err).strip().splitlines()
        detail = first[0][:200] if first else type(err).__name__
        raise ClientRefusal("bad-run-config", f"the run config's scenario: {detail}") from None


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
