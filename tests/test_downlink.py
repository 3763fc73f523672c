"""Downlink compression: the server sends each client a compressed difference to the model that
client holds (its replica); the difference left out goes with the next download, and the replicas
on both sides stay bit-identical (checked by digest), or are reset."""

from __future__ import annotations

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.clientapp import ClientApp

from fedgc.compress.downlink import (
    DOWNLINK_COMPRESSORS,
    DownlinkConfig,
    apply_download,
    as_replica,
    make_download,
    model_digest,
)
from fedgc.flower.client import client_app as fedgc_client
from fedgc.flower.client.downlink_mod import REPLICA_KEY, downlink_mod, initial_model
from fedgc.flower.client_config import client_config_record
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.downlink_stage import DELTA_KEY, RESET, DownlinkStage
from fedgc.flower.server.loop import run_rounds
from fedgc.flower.state.client_state import pack_state, unpack_state
from fedgc.flower.update_record import decode_update, encode_update
from fedgc.runs.metrics import read_metrics
from fedgc.scenario.model import ScenarioError, validate


def weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"fc.weight": torch.randn(40, 30, generator=g), "fc.bias": torch.randn(40, generator=g)}


@pytest.mark.parametrize("name", [n for n in DOWNLINK_COMPRESSORS if n != "none"])
@pytest.mark.parametrize("value_dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("dense_small_tensors", [True, False])
def test_the_client_rebuilds_exactly_the_servers_replica_from_the_wire_bytes(name, value_dtype, dense_small_tensors):
    config = DownlinkConfig(name=name, density=0.1, value_dtype=value_dtype, dense_small_tensors=dense_small_tensors)
    replica, target = weights(0), weights(1)
    download = make_download(target, replica, config, config.compressor(), torch.Generator().manual_seed(3))
    shapes = {k: tuple(v.shape) for k, v in replica.items()}
    received = decode_update(encode_update(download.payloads), shapes)
    assert model_digest(apply_download(replica, received)) == model_digest(download.replica)


def test_what_a_download_leaves_out_is_sent_later_so_the_replica_reaches_the_model():
    config = DownlinkConfig(name="topk", density=0.1, dense_small_tensors=False)
    replica, target = weights(0), weights(1)
    for _ in range(10):  # 10% of the entries per download, largest difference first
        before = {k: target[k] - replica[k] for k in replica}
        download = make_download(target, replica, config, config.compressor())
        sent = {k: download.replica[k] - replica[k] for k in replica}
        for k in replica:  # nothing dropped: what is still missing is exactly what was not sent
            assert torch.allclose(target[k] - download.replica[k], before[k] - sent[k], atol=1e-6)
        assert download.elements_sent == sum(-(-v.numel() // 10) for v in replica.values())
        replica = download.replica
    assert all(torch.allclose(replica[k], target[k], atol=1e-6) for k in target)


@pytest.mark.parametrize("name", ["dgc", "powersgd", "bogus"])
def test_a_stateful_or_unknown_downlink_compressor_is_a_one_line_error(tiny_scenario, name):
    with pytest.raises(ScenarioError) as err:
        validate({**tiny_scenario, "downlink": {"name": name}})
    assert "downlink" in str(err.value) and "\n" not in str(err.value)


def run(tmp_path, scenario_tree: dict, app: ClientApp | None = None):
    scenario = validate(scenario_tree)
    grid = InlineGrid.for_scenario(scenario, app)
    summary = run_rounds(grid, scenario, tmp_path)
    return summary, read_metrics(tmp_path / "metrics.jsonl"), grid


def churn_scenario(tiny: dict, downlink: dict) -> dict:
    """Over-selection and churn: late and cut uploads every few rounds, and downloads to all of them."""
    return {**tiny, "rounds": 6, "downlink": downlink,
            "data": {"dataset": "digits", "num_clients": 8, "partition": "dirichlet", "alpha": 1.0},
            "strategy": {"fraction": 0.25},
            "network": {"profile": "3g", "over_selection": 2.0, "availability": "exponential",
                        "mean_on_s": 6.0, "mean_off_s": 2.0}}


def test_downloads_shrink_and_every_client_stays_in_sync_through_late_and_cut_uploads(tmp_path, tiny_scenario):
    dense_summary, dense_rows, _ = run(tmp_path / "dense", churn_scenario(tiny_scenario, {"name": "none"}))
    summary, rows, grid = run(tmp_path / "topk", churn_scenario(tiny_scenario, {"name": "topk", "density": 0.01}))
    assert sum(r["late"] + r["cut"] + r["discarded"] for r in rows) > 0
    assert summary.clients_failed == 0 and sum(r["downlink_resets"] for r in rows) == 0
    per_download = summary.bytes_down / sum(r["selected"] for r in rows)
    dense_per_download = dense_summary.bytes_down / sum(r["selected"] for r in dense_rows)
    assert dense_per_download / per_download > 5, (dense_per_download, per_download)
    assert all(0.01 <= r["downlink_density"] < 0.2 for r in rows)
    assert all(r["downlink_density"] is None for r in dense_rows)
    # Zero failures above means every download's digests matched: client and server agreed on every
    # replica. Each client that trained holds one, moved away from the initial model.
    initial = model_digest(initial_model(grid.contexts[1]))
    holders = [c for c in grid.contexts.values() if REPLICA_KEY in c.state.array_records]
    assert len(holders) == sum(1 for c in grid.contexts.values() if c.state.array_records)
    assert holders and all(model_digest(unpack_state(c.state.array_records[REPLICA_KEY])) != initial for c in holders)


def corrupting_app(node: int, at_round: int) -> ClientApp:
    """fedgc's ClientApp, with a mod that damages one client's replica before the downlink mod runs."""

    def corrupt(msg: Message, context: Context, call_next) -> Message:
        config = msg.content.config_records["config"]
        if context.node_id == node and int(config["server-round"]) == at_round:
            replica = unpack_state(context.state.array_records[REPLICA_KEY])
            first = next(iter(replica))
            replica[first] = replica[first] + 1.0
            context.state[REPLICA_KEY] = pack_state(replica)
        return call_next(msg, context)

    app = ClientApp(mods=[corrupt, downlink_mod])
    app.train()(fedgc_client.train)
    return app


def test_a_client_whose_replica_went_wrong_fails_once_then_gets_the_whole_model(tmp_path, tiny_scenario):
    tree = {**tiny_scenario, "rounds": 4, "downlink": {"name": "topk", "density": 0.05}}
    _summary, rows, _ = run(tmp_path, tree, corrupting_app(node=2, at_round=2))
    assert [r["failed"] for r in rows] == [0, 1, 0, 0]  # fraction 1.0: every node every round
    assert 2 not in rows[1]["applied_nodes"] and 2 in rows[2]["applied_nodes"]
    assert [r["downlink_resets"] for r in rows] == [0, 0, 1, 0]  # round 3: node 2 is reset, then in sync


def train_message(node: int, model: dict[str, torch.Tensor], server_round: int, scenario: dict | None = None) -> Message:
    config = ConfigRecord({"server-round": server_round, "density": 0.05, "num-clients": 1, "applied-rounds": []})
    content = RecordDict({"arrays": ArrayRecord({k: v.contiguous() for k, v in model.items()}), "config": config})
    if scenario is not None:  # the ClientApp runs: its settings travel in the message
        content["client-config"] = client_config_record(validate(scenario), (1, 8, 8), 10)  # digits
    return Message(content=content, message_type=MessageType.TRAIN, dst_node_id=node)


def downlink_over_inline(tiny_scenario):
    scenario = validate({**tiny_scenario, "downlink": {"name": "topk", "density": 0.05}})
    inline = InlineGrid.for_scenario(scenario)
    initial = initial_model(inline.contexts[1])
    return inline, DownlinkStage(scenario.downlink, initial, scenario.seed), initial


def send(stage: DownlinkStage, inline: InlineGrid, message: Message, *, pull: bool = True):
    """One round of the loop for one message: downlink stage, push, (pull,) confirm. Returns what the
    downloads carried and the reply (None when not pulled)."""
    stage.settle_waiting(inline, {message.metadata.dst_node_id})
    downloads = stage.encode([message])
    ids = list(inline.push_messages([message]))
    replies = list(inline.pull_messages(ids)) if pull else []
    stage.confirm(downloads, ids, replies)
    return downloads, (replies[0] if replies else None)


def test_a_download_never_answered_is_followed_by_a_reset(tiny_scenario):
    inline, stage, initial = downlink_over_inline(tiny_scenario)
    model = {k: v + 0.01 for k, v in initial.items()}
    first = train_message(1, model, 1, tiny_scenario)
    send(stage, inline, first, pull=False)
    assert DELTA_KEY in first.content.array_records
    inline.pull_messages([first.metadata.message_id])  # the reply is lost: the server cannot know what node 1 holds
    second = train_message(1, model, 2, tiny_scenario)
    downloads, reply = send(stage, inline, second)
    assert second.content.config_records["config"][RESET] and "arrays" in second.content.array_records
    assert not reply.has_error() and downloads.resets == 1
    held = unpack_state(inline.contexts[1].state.array_records[REPLICA_KEY])
    assert model_digest(held) == model_digest(as_replica(model)) == stage.replicas[1][1]


def test_a_reply_the_round_stopped_waiting_for_still_confirms_the_replica(tiny_scenario):
    """On a real deployment the round may close before a reply is pulled (deadline, first K in); the
    reply arrives anyway, and the server picks it up before the node's next download."""
    inline, stage, initial = downlink_over_inline(tiny_scenario)
    send(stage, inline, train_message(1, {k: v + 0.01 for k, v in initial.items()}, 1, tiny_scenario), pull=False)
    later = train_message(1, {k: v + 0.02 for k, v in initial.items()}, 2, tiny_scenario)
    downloads, reply = send(stage, inline, later)
    assert DELTA_KEY in later.content.array_records and downloads.resets == 0
    assert not reply.has_error()
    held = unpack_state(inline.contexts[1].state.array_records[REPLICA_KEY])
    assert model_digest(held) == stage.replicas[1][1]


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda content: content.config_records["config"].pop("downlink-base"), "digests"),
    (lambda content: content.config_records["config"].__setitem__("downlink-digest", "0" * 16), "does not match"),
    (lambda content: content.array_records.__setitem__("model-delta", ArrayRecord()), "update"),
])
def test_a_malformed_download_is_refused_with_one_line(tiny_scenario, damage, reason):
    """The client half refuses a damaged download before training (the round counts it as failed)."""
    inline, stage, initial = downlink_over_inline(tiny_scenario)
    message = train_message(1, {k: v + 0.01 for k, v in initial.items()}, 1)
    stage.encode([message])
    damage(message.content)
    with pytest.raises(Exception) as err:
        downlink_mod(message, inline.contexts[1], lambda m, c: pytest.fail("the ClientApp must not run"))
    assert reason in str(err.value) and "\n" not in str(err.value)
    assert REPLICA_KEY not in inline.contexts[1].state.array_records  # nothing stored from a bad download


def test_a_reset_that_is_not_the_model_is_refused(tiny_scenario):
    inline, _, _ = downlink_over_inline(tiny_scenario)
    wrong = {"fc.weight": torch.zeros(3, 3)}
    message = train_message(1, wrong, 1)
    message.content.config_records["config"][RESET] = True
    with pytest.raises(Exception, match="not the model's"):
        downlink_mod(message, inline.contexts[1], lambda m, c: pytest.fail("the ClientApp must not run"))
    model = initial_model(inline.contexts[1])
    nan = train_message(1, {k: torch.full_like(v, float("nan")) for k, v in model.items()}, 1)
    nan.content.config_records["config"][RESET] = True
    with pytest.raises(Exception, match="non-finite"):
        downlink_mod(nan, inline.contexts[1], lambda m, c: pytest.fail("the ClientApp must not run"))
