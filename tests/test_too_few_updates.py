"""A round with fewer than ``strategy.min_clients`` completed updates is skipped (the model does not
change) or, with ``strategy.too_few: retry``, run again under the same round number with a fresh
selection, up to ``strategy.max_retries`` times; every attempt is a row of metrics.jsonl."""

from __future__ import annotations

import itertools

import yaml

from fedgc.cli.run import main
from fedgc.runs.metrics import read_metrics


def churny(tiny: dict, too_few: str) -> dict:
    return {**tiny, "rounds": 6, "checkpoint_every": 0,
            "data": {"dataset": "digits", "num_clients": 6, "partition": "iid"},
            "compression": {"name": "dgc", "density": 0.05, "warmup_rounds": 3},
            "strategy": {"fraction": 0.5, "min_clients": 3, "too_few": too_few, "max_retries": 2},
            "network": {"profile": "3g", "availability": "exponential", "mean_on_s": 4.0, "mean_off_s": 4.0}}


def run(tmp_path, tree: dict) -> tuple[list[dict], dict]:
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tree))
    assert main([str(tmp_path / "s.yaml"), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    import json

    return read_metrics(tmp_path / "run" / "metrics.jsonl"), json.loads((tmp_path / "run" / "summary.json").read_text())


def test_skip_moves_on_without_changing_the_model(tmp_path, tiny_scenario):
    rows, summary = run(tmp_path, churny(tiny_scenario, "skip"))
    assert [r["round"] for r in rows] == [1, 2, 3, 4, 5, 6]
    skipped = [r for r in rows if r["skipped"]]
    assert skipped, "the churn leaves some rounds with too few updates"
    assert all(r["applied"] == 0 and r["attempt"] == 0 for r in skipped)
    assert summary["rounds"] == 6 and summary["rounds_skipped"] == len(skipped)


def test_retry_runs_the_same_round_again_until_enough_updates_or_max_retries(tmp_path, tiny_scenario):
    rows, summary = run(tmp_path, churny(tiny_scenario, "retry"))
    assert sorted({r["round"] for r in rows}) == [1, 2, 3, 4, 5, 6] and summary["rounds"] == 6
    assert len(rows) > 6, "some rounds were retried"
    for before, after in itertools.pairwise(rows):
        assert after["sim_start_s"] >= before["sim_end_s"]  # one clock; a retry takes time too
        if before["skipped"] and before["attempt"] < 2:  # retried: same round, next attempt, same warm-up density
            assert (after["round"], after["attempt"], after["density"]) == \
                (before["round"], before["attempt"] + 1, before["density"])
        else:
            assert (after["round"], after["attempt"]) == (before["round"] + 1, 0)
    assert all(r["accuracy"] is None for r in rows if r["skipped"] and r["attempt"] < 2)
    assert summary["rounds_skipped"] == sum(r["skipped"] for r in rows)
