"""The pure logic of bench/shakespeare_federated.py: time to target, one run's figures, seeds'
aggregation, the block, and the replayed clock (on the shared traces, when they are there)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from tests.conftest import get_shared, shared_dir

BENCH = Path(__file__).resolve().parents[1] / "bench"
SHARED = shared_dir()


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("shakespeare_federated_under_test", BENCH / "shakespeare_federated.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def rows(accuracies: dict[int, float], rounds: int = 4, up: int = 100, dense_up: int = 1000) -> list[dict]:
    out = []
    for rnd in range(1, rounds + 1):
        acc = accuracies.get(rnd)
        out.append({"round": rnd, "accuracy": acc, "loss": 2.0 if acc is not None else None, "train_loss": 3.0,
                    "bytes_up": up * rnd, "bytes_down": 500, "dense_bytes_up": dense_up, "sim_end_s": 10.0 * rnd})
    return out


def test_time_to(bench):
    curve = [(10.0, 0.1), (20.0, 0.3), (30.0, 0.2), (40.0, 0.4)]
    assert bench.time_to(curve, 0.3) == 20.0
    assert bench.time_to(curve, 0.35) == 40.0
    assert bench.time_to(curve, 0.5) is None


def test_summarize_one_run(bench):
    r = rows({2: 0.2, 4: 0.3})
    clocks = {"lte": {x["round"]: x["sim_end_s"] for x in r}, "3g": {rnd: 100.0 * rnd for rnd in range(1, 5)}}
    s = bench.summarize(r, {"wall_time_s": 5.0}, clocks, rounds=4, warmup=2, targets=[0.25])
    assert s["final_accuracy"] == 0.3 and s["best_accuracy"] == 0.3 and not s["partial"]
    assert math.isclose(s["perplexity"], math.exp(2.0))
    assert s["bytes_up"] == 100 + 200 + 300 + 400 and s["bytes_down"] == 2000
    assert math.isclose(s["ratio_up_after_warmup"], 2000 / 700)  # rounds 3 and 4 only
    assert s["time_to_0.25_lte"] == 40.0 and s["time_to_0.25_3g"] == 400.0 and s["round_to_0.25"] == 4
    assert s["sim_time_s_3g"] == 400.0
    # An unfinished run: figures up to its last evaluation, marked partial.
    p = bench.summarize(r[:3], None, clocks, rounds=4, warmup=2, targets=[0.25])
    assert p["partial"] and p["rounds"] == 2 and p["bytes_up"] == 300 and p["time_to_0.25_lte"] is None


DONE = {"wall_time_s": 1.0}


def test_aggregate_render_and_json(bench):
    clocks = {"lte": {rnd: 10.0 * rnd for rnd in range(1, 5)}, "3g": {rnd: 30.0 * rnd for rnd in range(1, 5)}}
    per = {
        "dense": {s: bench.summarize(rows({2: 0.2, 4: 0.3 + s / 100}, up=1000), DONE, clocks, 4, 2, [0.25])
                  for s in (0, 1)},
        "dgc": {0: bench.summarize(rows({2: 0.2, 4: 0.3}), DONE, clocks, 4, 2, [0.25]),
                1: bench.summarize(rows({2: 0.2, 4: 0.2}), DONE, clocks, 4, 2, [0.25])},
    }
    results = {m: bench.aggregate(runs, [0.25]) for m, runs in per.items()}
    assert results["dense"]["n"] == 2 and math.isclose(results["dense"]["final_accuracy"], 0.305)
    assert results["dgc"]["time_to_0.25_lte_reached"] == 1 and results["dgc"]["time_to_0.25_lte"] == 40.0
    assert results["dgc"]["accuracy_curve"] == [(2, 0.2), (4, 0.25)]
    scenario = {"data": {"num_clients": 10, "max_test_samples": 1000}, "model": {"name": "char_lstm"},
                "client": {"local_steps": 20, "batch_size": 10, "lr": 0.5, "momentum": 0.9},
                "strategy": {"fraction": 0.3, "server_lr": 1.0}, "rounds": 4, "eval": {"every": 2},
                "compression": {"density": 0.01, "clip_norm": 10.0, "warmup_rounds": 2}}
    block = bench.render(results, scenario, [0.25], {"lte_replay_max_rel_error": 0.0}, "img/x.png")
    assert block.startswith(bench.BEGIN) and block.endswith(bench.END)
    assert "| `dense` | 2 | 30.50 ± 0.71 | +0.00 |" in block and "| `dgc` | 2 |" in block
    assert "(1/2)" in block and "![accuracy vs round and vs simulated time](img/x.png)" in block
    out = bench.figures(results, [0.25], {"lte_replay_max_rel_error": 0.0})
    json.dumps(out, allow_nan=False)  # strict JSON, no curves
    assert "accuracy_curve" not in out["methods"]["dgc"] and out["methods"]["dgc"]["time_to_0.25_3g"] == 120.0


@pytest.mark.skipif(not (SHARED / "traces" / "mahimahi").is_dir() or not (SHARED / "traces" / "pensieve").is_dir(),
                    reason=get_shared(SHARED / "traces", "traces"))
def test_replay_clock_is_deterministic_and_slower_on_3g(bench, monkeypatch):
    monkeypatch.setenv("FEDGC_DATA_DIR", str(SHARED / "data"))
    monkeypatch.setenv("FEDGC_TRACE_DIR", str(SHARED / "traces"))
    monkeypatch.setenv("FEDGC_SHARED_DIR", str(SHARED))
    from fedgc.scenario.model import load_tree

    tree = load_tree(bench.SCENARIO)
    clients = [{"round": rnd, "attempt": 0, "node": node, "bytes_down": 3_300_000, "bytes_up": 3_300_000}
               for rnd in (1, 2) for node in (rnd, rnd + 3, rnd + 6)]
    lte = bench.replay_clock(tree, 0, bench.network_section("lte", tree["network"]), clients)
    g3 = bench.replay_clock(tree, 0, bench.network_section("3g", tree["network"]), clients)
    assert lte == bench.replay_clock(tree, 0, bench.network_section("lte", tree["network"]), clients)
    assert list(lte) == [1, 2] and 0 < lte[1] < lte[2] and g3[2] > lte[2]
    assert bench.replay_clock(tree, 1, bench.network_section("lte", tree["network"]), clients) != lte  # seed → links


@pytest.mark.slow
def test_lstm_round_bench_prints_one_json_line(capsys):
    """bench/lstm_round.py on a tiny round: one JSON object, shares in (0, 1)."""
    spec = importlib.util.spec_from_file_location("lstm_round_under_test", BENCH / "lstm_round.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--clients", "2", "--steps", "2", "--vectorized-steps", "1", "--reps", "1"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 < out["dgc_compress_share"] < 1 and 0 < out["dgc_select_share"] <= out["dgc_compress_share"]
    assert out["params"] == 819_920 and out["clients"] == 2 and isinstance(out["vectorized_fell_back"], bool)
