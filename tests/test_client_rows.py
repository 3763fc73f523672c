"""``clients.jsonl`` names what ``metrics.jsonl`` counts: one line per selected node and attempt, with
its outcome, the phase a late or cut client was in, the reason a reply was rejected or failed, its
phase times and its bytes. The lines of a round add up to that round's row, exactly."""

from __future__ import annotations

import json
from collections import Counter

import torch
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedgc.flower import keys
from fedgc.flower.client import client_app as fedgc_client
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.loop import run_rounds
from fedgc.runs.metrics import OUTCOMES, read_metrics
from fedgc.scenario.model import validate

FAILING, HOSTILE = 2, 5


def troubled_app() -> ClientApp:
    """Node 2's app raises; node 5 claims a non-integer number of examples (rejected)."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        if context.node_id == FAILING:
            raise RuntimeError("the phone ran out of memory")
        reply = fedgc_client.train(msg, context)
        if context.node_id == HOSTILE:
            reply.content.metric_records[keys.METRICS][keys.NUM_EXAMPLES] = 0.5
        return reply

    return app


def run(tmp_path, **network):
    tree = {"name": "clients", "seed": 4, "rounds": 6,
            "data": {"dataset": "digits", "num_clients": 8, "partition": "iid"},
            "model": {"name": "mlp"}, "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
            "compression": {"name": "topk", "density": 0.05}, "strategy": {"fraction": 0.75},
            "network": {"profile": "3g", "availability": "exponential", "mean_on_s": 4, "mean_off_s": 2,
                        "over_selection": 1.3, **network}}
    scenario = validate(tree)
    torch.manual_seed(0)
    run_rounds(InlineGrid.for_scenario(scenario, troubled_app()), scenario, tmp_path)
    rounds = read_metrics(tmp_path / "metrics.jsonl")
    clients = [json.loads(line) for line in (tmp_path / "clients.jsonl").read_text().splitlines()]
    return rounds, clients


def test_each_round_row_is_the_sum_of_its_client_lines(tmp_path):
    rounds, clients = run(tmp_path)
    seen = Counter()
    for row in rounds:
        mine = [c for c in clients if (c["round"], c["attempt"]) == (row["round"], row["attempt"])]
        outcomes = Counter(c["outcome"] for c in mine)
        seen.update(outcomes)
        assert set(outcomes) <= set(OUTCOMES)
        assert len(mine) == row["selected"] and [c["node"] for c in mine] == sorted(c["node"] for c in mine)
        assert sorted(c["node"] for c in mine if c["outcome"] == "applied") == row["applied_nodes"]
        assert outcomes["applied"] == row["applied"] and outcomes["failed"] == row["failed"]
        assert outcomes["rejected"] == row["rejected"]
        assert Counter(c["reason"] for c in mine if c["outcome"] == "rejected") == Counter(row["rejected_reasons"])
        for status in ("late", "cut", "discarded"):
            assert outcomes[status] == row[status]
        done = [c for c in mine if c["outcome"] in ("applied", "rejected", "skipped")]
        assert sum(c["bytes_up"] for c in done) == row["bytes_up"]
        assert sum(c["bytes_down"] for c in mine) == row["bytes_down"]
        assert sorted(c["upload_s"] for c in done) == sorted(row["client_upload_s"])
    # The scenario was made to produce every kind of trouble; each is named.
    assert seen["applied"] and seen["failed"] and seen["rejected"] and seen["cut"]


def test_a_client_line_says_who_and_where(tmp_path):
    _, clients = run(tmp_path)
    for c in clients:
        if c["outcome"] == "failed":
            assert c["node"] == FAILING and c["reason"] == "RuntimeError: the phone ran out of memory"
        if c["outcome"] == "rejected":
            assert c["node"] == HOSTILE and c["reason"] == "bad-num-examples"
        if c["outcome"] in ("late", "cut", "discarded"):
            # the phase it was in is the first one without a time; the phases before it have one
            times = [c["download_s"], c["compute_s"], c["upload_s"]]
            phase = ("download", "compute", "upload").index(c["phase"])
            assert all(t is not None and t >= 0 for t in times[:phase]) and all(t is None for t in times[phase:])
            assert c["bytes_up"] is None
        if c["outcome"] == "applied":
            assert c["phase"] is None and c["reason"] is None and c["bytes_up"] > 0
            assert all(t is not None and t >= 0 for t in (c["download_s"], c["compute_s"], c["upload_s"]))
