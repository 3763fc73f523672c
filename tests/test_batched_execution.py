"""``client.execution: vectorized`` on the inline engine: the round's clients train together
(``torch.func``), each with its own data, batch order, steps and optimizer state; everything after
local training is per client and unchanged. On the CPU, where CI runs, the run must learn what the
sequential run learns, within float tolerance, with the same traffic."""

from __future__ import annotations

import json

import pytest

from fedgc.engines import run_scenario
from fedgc.scenario import validate


def rows(tmp_path, tiny_scenario, name: str, **changes) -> list[dict]:
    tree = {**tiny_scenario, "name": name, "rounds": 4,
            "data": {**tiny_scenario["data"], "partition": "dirichlet", "alpha": 1.0},  # uneven client sizes
            "client": {"epochs": 1.0, "batch_size": 16, "lr": 0.1, "momentum": 0.5, "weight_decay": 1e-4},
            "compression": {"name": "none", "error_feedback": False}, **changes}
    run_scenario(validate(tree), tmp_path / name, quiet=True)
    return [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]


def test_vectorized_learns_what_sequential_learns(tmp_path, tiny_scenario):
    base = rows(tmp_path, tiny_scenario, "sequential")
    tree_client = {"epochs": 1.0, "batch_size": 16, "lr": 0.1, "momentum": 0.5, "weight_decay": 1e-4,
                   "execution": "vectorized"}
    batched = rows(tmp_path, tiny_scenario, "vectorized", client=tree_client)
    assert len(base) == len(batched) == 4
    for a, b in zip(base, batched):
        assert (a["bytes_up"], a["bytes_down"], a["applied_nodes"]) == (b["bytes_up"], b["bytes_down"], b["applied_nodes"])
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4)
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4) and abs(a["accuracy"] - b["accuracy"]) <= 0.01
    # It did train together: summed in another order, the floats are not all bit-identical.
    assert [r["train_loss"] for r in base] != [r["train_loss"] for r in batched]


def test_with_compressed_downloads_the_clients_train_one_by_one(tmp_path, tiny_scenario, capsys):
    client = {"local_steps": 3, "batch_size": 16, "lr": 0.1, "execution": "vectorized"}
    batched = rows(tmp_path, tiny_scenario, "down-v", client=client, downlink={"name": "topk", "density": 0.1})
    plain = rows(tmp_path, tiny_scenario, "down-s", client={**client, "execution": "sequential"},
                 downlink={"name": "topk", "density": 0.1})
    assert batched == plain
    assert capsys.readouterr().err.count("with downlink compression the clients train one by one") == 1
