"""Faults on the client side: a ClientApp that raises is a failed client, and the round goes on."""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.supercore.task_identity import TaskIdentity

from fedgc.flower import client_app as fedgc_client
from fedgc.flower.inline_grid import InlineGrid
from fedgc.flower.server import run_server
from fedgc.flower.setup import SCENARIO_YAML
from fedgc.metrics import read_metrics
from fedgc.scenario import dump_scenario, validate

BROKEN_NODE = 2


def flaky_client_app() -> ClientApp:
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        if context.node_id == BROKEN_NODE:
            raise RuntimeError("the phone ran out of memory")
        return fedgc_client.train(msg, context)

    return app


def test_a_raising_client_app_is_counted_as_failed_and_the_round_proceeds(tmp_path, tiny_scenario):
    scenario = validate({**tiny_scenario, "rounds": 3})
    run_config = {SCENARIO_YAML: dump_scenario(scenario)}
    grid = InlineGrid(flaky_client_app(), scenario.data.num_clients, run_config)
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, grid.run.run_id, SUPERLINK_NODE_ID
    summary = run_server(grid, scenario, tmp_path, quiet=True)

    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert summary.stopped_reason == "completed" and summary.rounds == 3
    for row in rows:  # fraction 1.0: every node is selected every round
        assert row["failed"] == 1 and row["applied"] == scenario.data.num_clients - 1
        assert BROKEN_NODE not in row["applied_nodes"]
    assert summary.clients_failed == 3 and summary.updates_applied == 3 * (scenario.data.num_clients - 1)
