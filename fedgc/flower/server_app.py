"""fedgc's Flower ServerApp: the same server logic on every engine (inline, simulation, deployment).

On Flower's runtimes the nodes are first asked which data partition they hold
(``fedgc.flower.partition_grid``), so node ids, selection and metrics match the inline engine's.
"""

from __future__ import annotations

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedgc.flower.partition_grid import PartitionGrid
from fedgc.flower.server import run_server
from fedgc.flower.setup import NODE_WAIT_S, OUT_DIR, QUIET, scenario_from_run_config

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    scenario = scenario_from_run_config(context.run_config)
    out = context.run_config.get(OUT_DIR)
    out_dir = Path(str(out)) if out else None
    wait_s = float(context.run_config.get(NODE_WAIT_S, 120.0))
    partitioned = PartitionGrid.census(grid, expected=scenario.data.num_clients, wait_s=wait_s)
    run_server(partitioned, scenario, out_dir, quiet=bool(context.run_config.get(QUIET, False)))
