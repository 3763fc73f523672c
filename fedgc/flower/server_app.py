"""fedgc's Flower ServerApp: the same server logic on every engine (inline, simulation, deployment)."""

from __future__ import annotations

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedgc.flower.server import run_server
from fedgc.flower.setup import OUT_DIR, scenario_from_run_config

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    scenario = scenario_from_run_config(context.run_config)
    out = context.run_config.get(OUT_DIR)
    out_dir = Path(str(out)) if out else None
    run_server(grid, scenario, out_dir, quiet=bool(context.run_config.get("quiet", False)))
