"""Faults on the client side: a ClientApp that raises is a failed client, and the round goes on; each
failure is written to failures.jsonl; a run that applies nothing for strategy.max_idle_rounds stops."""

from __future__ import annotations

import json

import pytest
import yaml
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedgc.cli.run import main
from fedgc.core.records import idle_reason
from fedgc.flower.client import client_app as fedgc_client
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.exchange import describe_failure
from fedgc.flower.server.loop import run_rounds
from fedgc.runs.metrics import FailureLog, RoundRecord, read_jsonl, read_metrics
from fedgc.scenario.model import validate

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
    grid = InlineGrid.for_scenario(scenario, flaky_client_app())
    summary = run_rounds(grid, scenario, tmp_path)

    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert summary.stopped_reason == "completed" and summary.rounds == 3
    for row in rows:  # fraction 1.0: every node is selected every round
        assert row["failed"] == 1 and row["applied"] == scenario.data.num_clients - 1
        assert BROKEN_NODE not in row["applied_nodes"]
    assert summary.clients_failed == 3 and summary.updates_applied == 3 * (scenario.data.num_clients - 1)


def run_with(app: ClientApp, tree: dict, out_dir):
    scenario = validate(tree)
    grid = InlineGrid.for_scenario(scenario, app)
    return run_rounds(grid, scenario, out_dir)


def failing_client_app(message: str) -> ClientApp:
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        raise ValueError(f"{message}\nsecond line of the message")

    return app


def test_each_failure_is_written_to_failures_jsonl_with_its_exception(tmp_path, tiny_scenario):
    run_with(flaky_client_app(), {**tiny_scenario, "rounds": 3}, tmp_path)
    failures = read_jsonl(tmp_path / "failures.jsonl")
    assert failures == [{"round": r, "attempt": 0, "node": BROKEN_NODE, "type": "RuntimeError",
                         "message": "the phone ran out of memory"} for r in (1, 2, 3)]


def test_a_run_where_every_client_fails_stops_as_idle_with_the_reason(tmp_path, tiny_scenario):
    tree = {**tiny_scenario, "rounds": 50, "strategy": {"fraction": 1.0, "max_idle_rounds": 4}}
    summary = run_with(failing_client_app("no space left on device"), tree, tmp_path)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert len(rows) == 4 and all(r["applied"] == 0 and r["failed"] == 4 for r in rows)
    assert summary.stopped_reason == ("idle: no update applied in 4 consecutive attempts "
                                      "(rounds 1-4: 16 selected, 16 failed); see strategy.max_idle_rounds")
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["stopped_reason"] == summary.stopped_reason and written["clients_failed"] == 16
    failures = read_jsonl(tmp_path / "failures.jsonl")
    assert len(failures) == 16 and {f["node"] for f in failures} == {1, 2, 3, 4}
    assert {(f["type"], f["message"]) for f in failures} == {("ValueError", "no space left on device")}


def test_max_idle_rounds_zero_never_stops(tmp_path, tiny_scenario):
    tree = {**tiny_scenario, "rounds": 3, "strategy": {"fraction": 1.0, "max_idle_rounds": 0}}
    summary = run_with(failing_client_app("broken"), tree, tmp_path)
    assert summary.stopped_reason.startswith("no_update_applied: no update was applied in the whole run (3 rounds, ")
    assert summary.rounds == 3 and summary.updates_applied == 0  # ran every round: the idle rule was off


def test_nobody_online_after_the_first_millisecond_exits_3_with_one_line(tmp_path, tiny_scenario, capsys):
    (tmp_path / "never.csv").write_text("client,start_s,end_s\n0,0,0.001\n")  # every client: cut in round 1
    tree = {**tiny_scenario, "rounds": 1000, "checkpoint_every": 0,
            "strategy": {"fraction": 1.0, "max_idle_rounds": 3},
            "network": {"profile": "lte", "availability": "trace",
                        "availability_file": str(tmp_path / "never.csv")}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tree))
    assert main([str(tmp_path / "s.yaml"), "--out", str(tmp_path / "run"), "--quiet"]) == 3
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped_reason"] == ("idle: no update applied in 3 consecutive attempts "
                                         "(rounds 1-3: 4 selected, 4 cut); see strategy.max_idle_rounds")
    assert len(errors) == 1 and summary["stopped_reason"] in errors[0], errors
    assert summary["rounds"] == 3 and summary["updates_applied"] == 0


def test_the_idle_reason_names_what_happened_in_the_idle_attempts():
    nobody = [RoundRecord(round=r) for r in (4, 5, 6)]
    assert idle_reason(nobody, 3) == ("no update applied in 3 consecutive attempts (rounds 4-6: no client was "
                                      "online); see strategy.max_idle_rounds")
    rejected = [RoundRecord(round=1, selected=2, rejected=2), RoundRecord(round=1, attempt=1, selected=2, late=2)]
    assert idle_reason(rejected, 2) == ("no update applied in 2 consecutive attempts (rounds 1-1: 4 selected, "
                                        "2 late, 2 rejected); see strategy.max_idle_rounds")
    assert idle_reason([RoundRecord(round=1, applied=1), *nobody[:2]], 3) is None  # one applied update resets it
    assert idle_reason(nobody[:2], 3) is None and idle_reason(nobody, 0) is None


@pytest.mark.parametrize(("reason", "expected"), [
    ("RuntimeError: out of memory\nTraceback (most recent call last):\n  ...", ("RuntimeError", "out of memory")),
    ("<class 'ZeroDivisionError'>:<'division by zero'>", ("ZeroDivisionError", "division by zero")),
    ("<class 'flwr.clientapp.client_app.ClientAppException'>:<'\nException ClientAppException occurred. "
     "Message: \nTraceback (most recent call last):\n  File \"x.py\"\nKeyError: 'partition-id'\n'>",
     ("KeyError", "'partition-id'")),
    ("", ("Error", "(no message)")),
])
def test_the_exception_type_and_message_are_read_from_either_engine_s_reason(reason, expected):
    failure = describe_failure(7, reason)
    assert (failure.node_id, failure.error_type, failure.message) == (7, *expected)


def test_a_resumed_run_keeps_the_failures_up_to_its_checkpoint(tmp_path):
    path = tmp_path / "failures.jsonl"
    log = FailureLog(path)
    for r in (1, 2, 3):
        log.append(r, 0, 2, "RuntimeError", f"round {r}")
    with path.open("a") as f:
        f.write('{"round": 4, "att')  # torn by a crash
    resumed = FailureLog(path, keep_rounds=2)
    assert resumed.count == 2 and [f["round"] for f in read_jsonl(path)] == [1, 2]
