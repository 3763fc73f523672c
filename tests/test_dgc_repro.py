"""The pure logic of bench/dgc_repro.py: variants, one run's figures, seeds' aggregation, the block."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def repro():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("dgc_repro_under_test", BENCH / "dgc_repro.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


COMPRESSION = {"momentum": 0.9, "clip_norm": 0.5, "density": 0.001, "warmup_rounds": 4, "sample_ratio": 0.01}


def test_variants(repro):
    v = repro.variants(COMPRESSION, 4, dense_clip=True, extra=False)
    assert list(v) == ["dense", "dgc", "no_momentum_correction", "no_clipping", "no_masking", "no_warmup"]
    assert v["dgc"] == []
    assert "compression.name=none" in v["dense"] and "strategy.server_momentum=0.9" in v["dense"]
    assert "strategy.clip_update_norm=0.25" in v["dense"]  # C / sqrt(N): DGC's per-worker threshold
    assert v["no_clipping"] == ["compression.clip_norm=null"]
    assert "strategy.server_optimizer=momentum" in v["no_momentum_correction"]
    unclipped = repro.variants(COMPRESSION, 4, dense_clip=False, extra=True)
    assert not any(s.startswith("strategy.clip_update_norm") for s in unclipped["dense"])
    assert unclipped["dense_no_clipping"] == unclipped["dense"]
    assert unclipped["no_momentum_correction_no_momentum"] == ["compression.momentum_correction=false"]


def _rows(rounds: int, accs: dict[int, float], dense: bool) -> list[dict]:
    rows = []
    for r in range(1, rounds + 1):
        density = 1.0 if dense else (0.25 if r <= 4 else 0.001)
        up = 1000 if dense else (250 if r <= 4 else 10)
        rows.append({"round": r, "density": density, "bytes_up": 4 * up, "dense_bytes_up": 4000, "completed": 4,
                     "client_upload_bytes": [up] * 4, "train_loss": 2.0 + (r == 3), "clipped_nodes": [1] if r == 2 else [],
                     "accuracy": accs.get(r), "loss": (1.0 + r / 100) if r in accs else None})
    return rows


def test_summarize_run(repro):
    rows = _rows(20, {5: 0.2, 10: 0.3, 15: 0.4, 20: 0.5}, dense=False)
    r = repro.summarize_run(rows, {"wall_time_s": 12.0, "rounds": 20}, rounds=20)
    assert r["final_accuracy"] == 0.5 and r["final_loss"] == pytest.approx(1.2)
    assert r["perplexity"] == pytest.approx(math.exp(1.2))
    assert r["mean_last3_accuracy"] == pytest.approx(0.4)
    assert r["early_accuracy"] is None  # round 2 (= rounds // 10) was not evaluated
    assert r["ratio_after_warmup"] == pytest.approx(100.0)  # 4000 / 40 over rounds 5..20
    assert r["upload_bytes_per_message_after_warmup"] == pytest.approx(10.0)
    assert r["max_train_loss"] == 3.0 and r["clipped_share"] == pytest.approx(0.25 / 20)
    assert not r["partial"]
    cut = repro.summarize_run(rows[:17], None, rounds=20)  # in progress: up to its last evaluation
    assert cut["partial"] and cut["rounds"] == 15 and cut["final_accuracy"] == 0.4


def test_aggregate_mean_and_sample_std(repro):
    runs = {s: repro.summarize_run(_rows(10, {5: a, 10: b}, dense=True), {"wall_time_s": 1.0}, rounds=10)
            for s, (a, b) in enumerate([(0.1, 0.3), (0.2, 0.5)])}
    agg = repro.aggregate(runs)
    assert agg["n"] == 2 and agg["seeds"] == [0, 1]
    assert agg["final_accuracy"] == pytest.approx(0.4)
    assert agg["final_accuracy_std"] == pytest.approx(math.sqrt(0.02))  # sample std (n - 1), not population
    assert agg["accuracy_curve"] == [(5, pytest.approx(0.15)), (10, pytest.approx(0.4))]
    assert repro.mean_std([3.0]) == (3.0, 0.0)
    mean, std = repro.mean_std([3.0, float("nan")])  # a partial run beside a finished one: no crash
    assert math.isnan(mean) and math.isnan(std)


def test_block_written_between_markers(repro, tmp_path):
    runs = {0: repro.summarize_run(_rows(10, {5: 0.2, 10: 0.4}, dense=True), {"wall_time_s": 1.0}, rounds=10),
            1: repro.summarize_run(_rows(10, {5: 0.2, 10: 0.5}, dense=True), {"wall_time_s": 1.0}, rounds=10)}
    results = {"dense": repro.aggregate(runs), "dgc": repro.aggregate({0: runs[0]})}
    scenario = {"name": "toy", "rounds": 10, "data": {"num_clients": 4, "partition": "iid", "dataset": "x",
                                                      "max_test_samples": None},
                "model": {"name": "m"}, "client": {"batch_size": 8, "lr": 0.1}, "eval": {"every": 5},
                "compression": COMPRESSION}
    sets = repro.variants(COMPRESSION, 4, True, False)
    begin, end = "<!-- toy-repro:begin -->", "<!-- toy-repro:end -->"
    path = tmp_path / "results.md"
    path.write_text(f"# R\n\nbefore\n\n{begin}\nold\n{end}\n\nafter\n")
    repro.write_block(path, begin, end, repro.render(results, scenario, sets, ["rounds=10"], begin, end, None))
    text = path.read_text()
    assert text.startswith("# R\n\nbefore\n\n" + begin) and text.endswith(end + "\n\nafter\n")
    assert "old" not in text
    assert "| `dense` | 2 | 45.00 ± 7.07 | +0.00 |" in text
    assert "| `dgc` | 1 | 40.00 | -5.00 |" in text
    fig = repro.figures(results)
    assert fig["dgc_minus_dense_pp"] == pytest.approx(-5.0) and fig["dgc_within_1pp"] is False
    json.dumps(fig)  # the last line must be JSON


def test_last_line_is_strict_json(repro):
    run = repro.summarize_run(_rows(10, {10: 0.4}, dense=True), {"wall_time_s": float("nan")}, rounds=10)
    fig = repro.figures({"dense": repro.aggregate({0: run})})
    assert fig["dense"]["early_accuracy"] is None and fig["dense"]["wall_time_s"] is None
    json.dumps(fig, allow_nan=False)  # raises on NaN or infinity


TINY = {"name": "tiny", "seed": 3, "rounds": 3, "checkpoint_every": 1,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"}, "model": {"name": "logreg"},
        "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1}, "compression": {"name": "topk", "density": 0.1},
        "strategy": {"fraction": 1.0}, "eval": {"every": 1}}


def test_a_run_cut_short_goes_on_from_its_checkpoint_and_a_finished_one_is_kept(repro, tmp_path, monkeypatch):
    """Long runs span sessions: a run folder with a checkpoint whose summary says it was interrupted
    is resumed (``fedgc run --resume``), not started again; a finished one is read as it is."""
    import yaml

    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(TINY))
    run_dir = tmp_path / "seed3" / "dgc"
    commands: list[list[str]] = []
    real_run = repro.subprocess.run
    monkeypatch.setattr(repro.subprocess, "run", lambda cmd, **kw: commands.append(cmd) or real_run(cmd, **kw))
    assert repro.run_one(scenario, run_dir, [], 3, False, False)["rounds"] == 3
    assert "--overwrite" in commands[-1]
    metrics = (run_dir / "metrics.jsonl").read_bytes()
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "rounds": 2, "stopped_reason": "interrupted"}))
    (run_dir / "metrics.jsonl").write_bytes(b"".join(metrics.splitlines(keepends=True)[:2]))  # stopped after round 2
    assert repro.run_one(scenario, run_dir, [], 3, False, False)["rounds"] == 3
    assert commands[-1][-3:] == ["--resume", str(run_dir), "--quiet"]
    assert json.loads((run_dir / "summary.json").read_text())["stopped_reason"] == "completed"
    assert (run_dir / "metrics.jsonl").read_bytes() == metrics  # the resumed rounds are the same rounds
    repro.run_one(scenario, run_dir, [], 3, False, False)
    assert len(commands) == 2  # finished: nothing run again


def test_a_bench_run_to_a_horizon_is_extended_and_read_at_a_shorter_one(repro, tmp_path, monkeypatch):
    """``--rounds`` raised after a bench finished extends its runs from their checkpoints (the folder's
    scenario.yaml given the new rounds) to the rows of a run started with them; a shorter horizon reads
    a longer run's first rounds and runs nothing."""
    import yaml

    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump({**TINY, "rounds": 5}))
    longer = tmp_path / "longer"
    assert repro.run_one(scenario, longer, [], 5, False, False)["rounds"] == 5
    run_dir = tmp_path / "seed3" / "dgc"
    assert repro.run_one(scenario, run_dir, ["rounds=3"], 3, False, False)["rounds"] == 3
    commands: list[list[str]] = []
    real_run = repro.subprocess.run
    monkeypatch.setattr(repro.subprocess, "run", lambda cmd, **kw: commands.append(cmd) or real_run(cmd, **kw))
    extended = repro.run_one(scenario, run_dir, ["rounds=5"], 5, False, False)
    assert commands[-1][-3:] == ["--resume", str(run_dir), "--quiet"] and extended["rounds"] == 5
    assert "rounds: 5\n" in (run_dir / "scenario.yaml").read_text()
    assert (run_dir / "metrics.jsonl").read_bytes() == (longer / "metrics.jsonl").read_bytes()
    shorter = repro.run_one(scenario, run_dir, ["rounds=4"], 4, False, False)
    assert len(commands) == 1, "the run already reaches round 4: nothing is run"
    assert shorter["rounds"] == 4 and not shorter["partial"]
    assert shorter["accuracy_curve"] == extended["accuracy_curve"][:4]


def test_the_verdict_reads_the_plateau_not_one_evaluation(repro):
    """The second half's evaluations decide "within 1 pp": a last evaluation 3 points down on a plateau
    level with dense's is noise, not a gap."""
    dense = repro.summarize_run(_rows(20, {5: 0.2, 10: 0.44, 15: 0.45, 20: 0.46}, dense=True), {"wall_time_s": 1.0}, 20)
    dgc = repro.summarize_run(_rows(20, {5: 0.1, 10: 0.40, 15: 0.47, 20: 0.43}, dense=False), {"wall_time_s": 1.0}, 20)
    assert dgc["plateau_accuracy"] == pytest.approx(0.45)  # rounds 15 and 20: after round 10 of 20
    assert dgc["plateau_slope"] is None  # two points: no slope
    climbing = repro.summarize_run(_rows(20, {11: 0.40, 14: 0.43, 17: 0.46, 20: 0.49}, dense=True), None, 20)
    assert climbing["plateau_slope"] == pytest.approx(0.01)  # one point a round: not a plateau
    fig = repro.figures({"dense": repro.aggregate({0: dense}), "dgc": repro.aggregate({0: dgc})}, density=0.001)
    assert fig["dgc_minus_dense_pp"] == pytest.approx(-3.0)
    assert fig["dgc_minus_dense_plateau_pp"] == pytest.approx(-0.5) and fig["dgc_within_1pp"] is True
    assert fig["verdict"].startswith("**DGC within 1 pp of dense at 99.9% sparsity: yes**")
    worse = repro.summarize_run(_rows(20, {15: 0.43, 20: 0.44}, dense=False), {"wall_time_s": 1.0}, 20)
    fig = repro.figures({"dense": repro.aggregate({0: dense}), "dgc": repro.aggregate({0: worse})}, density=0.001)
    assert fig["dgc_within_1pp"] is False and ": no**" in fig["verdict"]


def test_a_summary_that_is_no_json_object_is_read_as_none(repro, tmp_path):
    """A ``summary.json`` cut short while written, or edited into something else, is not a finished run."""
    assert repro.read_summary(tmp_path) is None  # none at all
    for text in ('{"rounds": 3', "[1, 2]", "\xff\xfe", '"completed"'):
        (tmp_path / "summary.json").write_text(text, errors="surrogateescape")
        assert repro.read_summary(tmp_path) is None
    (tmp_path / "summary.json").write_text('{"rounds": 3, "stopped_reason": "completed"}')
    assert repro.read_summary(tmp_path) == {"rounds": 3, "stopped_reason": "completed"}
