"""``client.execution: vectorized`` on the inline engine: the round's clients train together
(``torch.func``), each with its own data, batch order, steps and optimizer state; everything after
local training is per client and unchanged. On the CPU, where CI runs, the run must learn what the
sequential run learns, within float tolerance, with the same traffic."""

from __future__ import annotations

import json

import pytest

from fedgc.runs.engines import run_scenario
from fedgc.scenario.model import validate


def rows(tmp_path, tiny_scenario, name: str, **changes) -> list[dict]:
    tree = {**tiny_scenario, "name": name, "rounds": 4,
            "data": {**tiny_scenario["data"], "partition": "dirichlet", "alpha": 1.0},  # uneven client sizes
            "client": {"epochs": 1.0, "batch_size": 16, "lr": 0.1, "momentum": 0.5, "weight_decay": 1e-4},
            "compression": {"name": "none", "error_feedback": False}, **changes}
    run_scenario(validate(tree), tmp_path / name, quiet=True)
    return [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
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


@pytest.mark.slow
def test_with_compressed_downloads_each_client_trains_from_its_own_replica(tmp_path, tiny_scenario, capsys):
    """Each client's model is rebuilt from its compressed download before the round trains together
    (as its downlink mod will rebuild it): the run learns what the sequential run learns, every
    replica stays in sync (no reset, no failure), and nothing falls back to one by one."""
    client = {"local_steps": 3, "batch_size": 16, "lr": 0.1, "execution": "vectorized"}
    downlink = {"name": "topk", "density": 0.1}
    batched = rows(tmp_path, tiny_scenario, "down-v", client=client, downlink=downlink)
    plain = rows(tmp_path, tiny_scenario, "down-s", client={**client, "execution": "sequential"}, downlink=downlink)
    assert "one by one" not in capsys.readouterr().err
    assert len(batched) == len(plain) == 4
    for a, b in zip(plain, batched):
        assert a["applied_nodes"] == b["applied_nodes"] and b["failed"] == 0 and b["downlink_resets"] == 0
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-3)
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-3) and abs(a["accuracy"] - b["accuracy"]) <= 0.01
    assert [r["train_loss"] for r in plain] != [r["train_loss"] for r in batched]  # it did train together
