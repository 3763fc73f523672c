"""``--seeds``: one run folder per seed; ``fedgc.reports.run_reports`` groups runs that differ only by seed into one
row (mean ± sample std, numpy's ``std(ddof=1)``, and n) and one overlay line with a ±std band; a sweep
folder reports its runs; two runs of one seed are refused unless ``--allow-duplicate-seeds``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from matplotlib.collections import PolyCollection

from fedgc.cli.run import main as simulate_main
from fedgc.reports.plots import COMPARE_PLOT_FILES, accuracy_points
from fedgc.reports.plots.overlays import mean_series, overlay_figure
from fedgc.reports.run_reports import main as report_main
from fedgc.reports.run_reports import read_runs

TINY = {"name": "tiny-seeds", "seed": 11, "rounds": 2,
        "data": {"dataset": "digits", "num_clients": 3, "partition": "iid"},
        "model": {"name": "mlp"}, "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "topk", "density": 0.05}, "network": {"profile": "wifi"},
        "eval": {"target_accuracy": 0.15}}

def simulate(tmp: Path, *args: str) -> int:
    scenario = tmp / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(TINY))
    return simulate_main([str(scenario), "--quiet", *args])


def report(capsys, *args) -> tuple[int, str, str]:
    code = report_main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def seeds_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("seeds")
    code = simulate(tmp, "--out", str(tmp / "out"), "--seeds", "0,1,2")
    assert code == 0
    return tmp / "out"


def summaries(folders: list[Path]) -> list[dict]:
    return [json.loads((f / "summary.json").read_text()) for f in folders]


@pytest.mark.slow
def test_each_seed_runs_into_its_own_folder(seeds_dir):
    folders = sorted(p for p in seeds_dir.iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["seed=0", "seed=1", "seed=2"]
    assert [yaml.safe_load((p / "scenario.yaml").read_text())["seed"] for p in folders] == [0, 1, 2]
    assert (seeds_dir / "report.md").is_file()
    for name in COMPARE_PLOT_FILES:
        assert (seeds_dir / name).stat().st_size > 5_000


def test_the_sweep_folder_reports_one_row_with_numpys_mean_and_std(capsys, seeds_dir):
    code, out, err = report(capsys, seeds_dir, "--format", "json")
    assert code == 0 and err == ""
    [row] = json.loads(out)
    runs = summaries([seeds_dir / f"seed={s}" for s in range(3)])
    assert (row["n"], row["seeds"], row["name"], row["compressor"]) == (3, [0, 1, 2], "tiny-seeds", "topk")
    assert row["path"].split(";") == [str(seeds_dir / f"seed={s}") for s in range(3)]
    for key in ("final_accuracy", "best_accuracy", "sim_time_s", "bytes_up", "bytes_down", "rounds"):
        values = np.array([s[key] for s in runs], dtype=float)
        mean = round(values.mean()) if key.startswith("bytes_") else values.mean()  # whole bytes
        assert row[key] == pytest.approx(mean), key
        assert row[f"{key}_std"] == pytest.approx(values.std(ddof=1)), key
        assert row[f"{key}_n"] == 3
    assert np.std([s["final_accuracy"] for s in runs]) > 0 or np.std([s["sim_time_s"] for s in runs]) > 0
    assert row["mb_up"] == pytest.approx(np.mean([s["bytes_up"] for s in runs]) / 1e6)


def test_csv_and_markdown_carry_the_group(capsys, seeds_dir):
    code, out, _ = report(capsys, seeds_dir, "--format", "csv")
    assert code == 0
    [row] = list(csv.DictReader(io.StringIO(out)))
    finals = [s["final_accuracy"] for s in summaries(sorted(p for p in seeds_dir.iterdir() if p.is_dir()))]
    assert (row["n"], row["seeds"]) == ("3", "0;1;2")
    assert float(row["final_accuracy"]) == pytest.approx(np.mean(finals))
    assert float(row["final_accuracy_std"]) == pytest.approx(np.std(finals, ddof=1))
    assert all(row[key].isdigit() for key in ("rounds", "bytes_up", "bytes_down", "rounds_n"))  # integers stay integers
    code, out, _ = report(capsys, seeds_dir)
    header, _, cells = out.splitlines()[:3]
    columns = dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in cells.strip("|").split("|")]))
    assert columns["n"] == "3" and columns["run"] == "tiny-seeds" and columns["target"] == "15.0%"
    assert columns["final acc"] == f"{np.mean(finals) * 100:.1f}% ± {np.std(finals, ddof=1) * 100:.1f}%"
    assert "mean ± sample standard deviation" in out


def test_runs_that_differ_by_more_than_the_seed_are_not_grouped(capsys, seeds_dir, tmp_path):
    code = simulate(tmp_path, "--out", str(tmp_path / "other"), "--set", "seed=0", "--set", "client.lr=0.05")
    assert code == 0
    capsys.readouterr()
    code, out, _ = report(capsys, seeds_dir, tmp_path / "other", "--format", "json")
    rows = json.loads(out)
    assert [(r["run"], r["n"]) for r in rows] == [("tiny-seeds", 3), ("other", 1)]
    assert (rows[1]["final_accuracy_std"], rows[1]["final_accuracy_n"]) == (None, 1)  # no std of one run
    single = summaries([tmp_path / "other"])[0]
    assert rows[1]["final_accuracy"] == single["final_accuracy"]
    code, out, _ = report(capsys, seeds_dir / "seed=1", "--format", "json")
    assert "n" not in json.loads(out)[0]  # a single run reads as before


def test_the_group_line_has_a_std_band(seeds_dir):
    runs = read_runs([seeds_dir])
    series = mean_series("tiny", [accuracy_points(r.rows) for r in runs], 0.15)
    per_run = np.array([[p.accuracy for p in accuracy_points(r.rows)] for r in runs])
    assert [p.accuracy for p in series.points] == pytest.approx(per_run.mean(axis=0))
    assert series.accuracy_std == pytest.approx(per_run.std(axis=0, ddof=1))
    fig = overlay_figure([series], lambda p: p.sim_time_s, "t", "x")
    [band] = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.max() == pytest.approx((per_run.mean(axis=0) + per_run.std(axis=0, ddof=1)).max() * 100)
    assert fig.axes[0].get_title() == "t (1 line, 3 runs)"
    alone = overlay_figure([mean_series("one", [accuracy_points(runs[0].rows)])], lambda p: p.sim_time_s, "t", "x")
    assert not [c for c in alone.axes[0].collections if isinstance(c, PolyCollection)]


def test_two_runs_of_the_same_seed_are_refused_unless_allowed(capsys, seeds_dir, tmp_path):
    import shutil

    shutil.copytree(seeds_dir / "seed=1", tmp_path / "again")  # the same scenario and seed, run twice
    code, out, err = report(capsys, seeds_dir, tmp_path / "again")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: seed=1 and again are the same scenario with the same seed 1: averaging them would "
                          "count one result twice")
    code, out, err = report(capsys, seeds_dir, tmp_path / "again", "--allow-duplicate-seeds", "--format", "json")
    assert code == 0 and json.loads(out)[0]["n"] == 4
    assert err == ("warning: seed=1 and again are the same scenario with the same seed 1; averaged as separate "
                   "runs (--allow-duplicate-seeds)\n")


@pytest.mark.slow
def test_seeds_combine_with_sweep_keys(capsys, tmp_path):
    out = tmp_path / "out"
    code = simulate(tmp_path, "--out", str(out), "--set", "rounds=1", "--sweep", "compression.name=none,topk",
                       "--seeds", "3,4")
    assert code == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        f"compression.name={c},seed={s}" for c in ("none", "topk") for s in (3, 4)]
    capsys.readouterr()
    code, text, _ = report(capsys, out, "--format", "json")
    rows = json.loads(text)
    assert [(r["run"], r["compressor"], r["n"], r["seeds"]) for r in rows] == [
        ("compression.name=none", "none", 2, [3, 4]), ("compression.name=topk", "topk", 2, [3, 4])]


def test_seeds_and_a_seed_sweep_together_are_one_line_and_exit_2(capsys, tmp_path):
    code = simulate(tmp_path, "--out", str(tmp_path / "out"), "--seeds", "0,1", "--sweep", "seed=2,3")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "seed" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
