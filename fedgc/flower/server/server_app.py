"""fedgc's Flower ServerApp: ``main(grid, context)`` drives fedgc's round loop (``fedgc.flower.server.loop``)
on Flower's runtimes, the simulation runtime and real SuperNodes alike.

The nodes are first asked which data partition they hold (``fedgc.flower.server.partition_grid``), so node
ids, selection and metrics match the inline engine's. The runtime decides the exchange: Flower's
simulation runtime (an ``InMemoryGrid``) has virtual nodes, replayed on the simulated network; any
other grid reaches real SuperNodes, whose traffic and times are measured, and whose replies are
collected as each completes (``fedgc.flower.server.superlink_grid``), not on Flower's pull backoff.
"""

from __future__ import annotations

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.superlink.grid.inmemory_grid import InMemoryGrid

from fedgc.core.checkpoint import CHECKPOINT
from fedgc.core.observe import default_observers
from fedgc.flower.keys import CLIENT_STORE_DIR
from fedgc.flower.server.loop import run_rounds
from fedgc.flower.server.partition_grid import PartitionGrid
from fedgc.flower.server.superlink_grid import collecting
from fedgc.flower.setup import NODE_WAIT_S, OUT_DIR, QUIET, scenario_from_run_config
from fedgc.flower.state.client_store import STORE_FILE
from fedgc.flower.state.disk_store import open_disk_store
from fedgc.flower.wire_versions import needed

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    scenario = scenario_from_run_config(context.run_config)
    out = context.run_config.get(OUT_DIR)
    out_dir = Path(str(out)) if out else None
    wait_s = float(context.run_config.get(NODE_WAIT_S, 120.0))
    # On a deployment, nodes that connect after the census join the run as they answer; Flower's
    # simulation runtime starts every virtual node before the run.
    partitioned = PartitionGrid.census(collecting(grid), expected=scenario.data.num_clients, wait_s=wait_s,
                                       admit_late=not isinstance(grid, InMemoryGrid), wire=needed(scenario))
    store_dir = context.run_config.get(CLIENT_STORE_DIR)
    if store_dir:  # the nodes keep their states in the run folder's store: a checkpoint is its mark
        partitioned.store = open_disk_store(Path(str(store_dir)) / STORE_FILE)
    # A run folder is new or empty when a run starts (fedgc.runs.folder), so a checkpoint in it means
    # `--resume`: the engine checked it against the scenario before starting the runtime.
    resume = out_dir is not None and (out_dir / CHECKPOINT).is_file()
    observers = default_observers(scenario.rounds, out_dir, quiet=bool(context.run_config.get(QUIET, False)),
                                  title=scenario.name, target_accuracy=scenario.eval.target_accuracy)
    run_rounds(partitioned, scenario, out_dir, measured=not isinstance(grid, InMemoryGrid),
               observers=observers, resume=resume)
