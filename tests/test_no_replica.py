"""A node that holds no replica of the initial model says so in its partition reply (``no-replica``,
docs/client-protocol.md): its first download is then a reset (the whole model), not a compressed
difference it could not apply — so a fresh device never fails its first round."""

from __future__ import annotations

import json

from flwr.app import Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity

from fedgc.flower import keys
from fedgc.flower.client import client_app as fedgc_client
from fedgc.flower.client.downlink_mod import REPLICA_KEY, downlink_mod
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.downlink_stage import DELTA_KEY
from fedgc.flower.server.loop import run_rounds
from fedgc.flower.server.partition_grid import PARTITION_QUERY, PartitionGrid
from fedgc.scenario.model import validate
from tests.flower_messages import instruction

FRESH = 2  # the partition of the device without a replica


def device_app(seen: list[tuple[int, bool]]) -> ClientApp:
    """fedgc's client, except that node FRESH cannot build the initial model (as a device in
    another language): a compressed download before it holds a replica fails it."""

    def record_download(msg: Message, context, call_next):
        if msg.metadata.message_type == "train":
            partition = int(context.node_config["partition-id"])
            compressed = DELTA_KEY in msg.content.array_records
            seen.append((partition, compressed))
            if partition == FRESH and compressed and REPLICA_KEY not in context.state.array_records:
                raise RuntimeError("no replica to apply a compressed download to")
        return call_next(msg, context)

    app = ClientApp(mods=[record_download, downlink_mod])
    app.train()(fedgc_client.train)
    app.query(PARTITION_QUERY.split(".", 1)[1])(fedgc_client.report_partition)
    return app


def run(tmp_path, tiny_scenario, announce: bool):
    scenario = validate({**tiny_scenario, "rounds": 2, "downlink": {"name": "topk", "density": 0.05}})
    seen: list[tuple[int, bool]] = []
    inline = InlineGrid.for_scenario(scenario, device_app(seen))
    if announce:
        inline.contexts[FRESH + 1].node_config[keys.NO_REPLICA] = 1
    grid = PartitionGrid.census(inline, expected=scenario.data.num_clients, wait_s=5)
    run_rounds(grid, scenario, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return grid, rows, seen


def test_a_fresh_device_announces_it_and_gets_the_whole_model_first(tmp_path, tiny_scenario):
    grid, rows, seen = run(tmp_path / "announced", tiny_scenario, announce=True)
    assert grid.without_replica == {FRESH + 1}
    assert [r["failed"] for r in rows] == [0, 0]
    assert rows[0]["downlink_resets"] == 1  # the fresh device's first download only
    assert [c for p, c in seen if p == FRESH] == [False, True]  # the whole model, then differences
    assert all(c for p, c in seen if p != FRESH)


def test_without_the_announcement_the_fresh_device_fails_once(tmp_path, tiny_scenario):
    grid, rows, _ = run(tmp_path / "silent", tiny_scenario, announce=False)
    assert grid.without_replica == set()
    assert [r["failed"] for r in rows] == [1, 0] and [r["downlink_resets"] for r in rows] == [0, 1]


def test_the_partition_reply_carries_the_flag_only_when_set():
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    context = type("C", (), {"node_config": {"partition-id": 0, "num-partitions": 2}})()
    msg = instruction(RecordDict(), dst_node_id=1, message_type=PARTITION_QUERY, message_id="q1")
    assert keys.NO_REPLICA not in fedgc_client.report_partition(msg, context).content.metric_records["partition"]
    context.node_config[keys.NO_REPLICA] = 1
    assert fedgc_client.report_partition(msg, context).content.metric_records["partition"][keys.NO_REPLICA] == 1
