"""Running a scenario on an engine. ``inline`` (default): the ServerApp and ClientApps in this
process, every message round-tripped through Flower's serialization. ``flower``: the same apps on
Flower's simulation runtime (Ray), needs ``pip install 'fedgc[ray]'``."""

from __future__ import annotations

from pathlib import Path

from fedgc.metrics import Summary
from fedgc.scenario import Scenario, dump_scenario


def run_inline(scenario: Scenario, out_dir: Path | None, *, quiet: bool = False, resume: bool = False) -> Summary:
    from flwr.app import Context, RecordDict
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.supercore.task_identity import TaskIdentity

    from fedgc.flower.client_app import app as client_app
    from fedgc.flower.inline_grid import InlineGrid
    from fedgc.flower.server import run_server
    from fedgc.flower.setup import SCENARIO_YAML

    run_config = {SCENARIO_YAML: dump_scenario(scenario)}
    grid = InlineGrid(client_app, scenario.data.num_clients, run_config)
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, grid.run.run_id, SUPERLINK_NODE_ID
    # Same logic as the ServerApp's main, called directly so the summary comes back to the caller.
    _ = Context(run_id=grid.run.run_id, node_id=SUPERLINK_NODE_ID, node_config={}, state=RecordDict(),
                run_config=run_config)
    return run_server(grid, scenario, out_dir, quiet=quiet, resume=resume)


class EngineUnavailable(ValueError):
    """An engine whose optional dependencies are not installed (reported in one line, exit 2)."""


def run_flower(scenario: Scenario, out_dir: Path | None, *, quiet: bool = False, resume: bool = False) -> Summary:
    """Flower's simulation runtime (Ray): a local SuperLink with ``--simulation`` and ``flwr run``."""
    import importlib.util

    if resume:
        raise ValueError("--resume works with engine inline only")
    if importlib.util.find_spec("ray") is None:
        raise EngineUnavailable("engine 'flower' needs Ray, which is not installed: pip install 'fedgc[ray]'")
    from fedgc.flower.flower_engine import run_on_simulation_runtime

    return run_on_simulation_runtime(scenario, out_dir, quiet=quiet)


ENGINES = {"inline": run_inline, "flower": run_flower}
