"""``python -m fedgc run SCENARIO --sweep KEY=A,B``: one normal run folder per point and a report;
an invalid sweep is a one-line error with exit code 2 before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fedgc.cli.run import main
from fedgc.reports.run_reports import read_runs
from fedgc.sweeps.plan import SweepAxis, SweepError, sweep_points

TINY = {"name": "tiny-sweep", "seed": 11, "rounds": 1,
        "data": {"dataset": "digits", "num_clients": 3, "partition": "iid"},
        "model": {"name": "mlp"}, "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "dgc", "density": 0.05}, "network": {"profile": "wifi"}}

RUN_FILES = {"scenario.yaml", "metrics.jsonl", "summary.json", "model.pt", "plots"}


@pytest.fixture
def scenario_file(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def test_a_two_value_sweep_writes_two_run_folders_and_a_report(scenario_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    code = main([str(scenario_file), "--out", str(out), "--quiet", "--set", "rounds=2",
                 "--sweep", "compression.name=none,topk"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    folders = ["compression.name=none", "compression.name=topk"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == folders
    for folder, compressor in zip(folders, ("none", "topk")):
        assert RUN_FILES <= {p.name for p in (out / folder).iterdir()}
        resolved = yaml.safe_load((out / folder / "scenario.yaml").read_text())
        assert resolved["compression"]["name"] == compressor and resolved["rounds"] == 2  # --set applies to all
        assert json.loads((out / folder / "summary.json").read_text())["rounds"] == 2
    report = (out / "report.md").read_text()
    assert captured.out == report  # the table is printed too
    assert all(f"| {folder} |" in report for folder in folders)
    assert (out / "compare_accuracy_vs_upload.png").stat().st_size > 0
    dense, topk = read_runs([out / f for f in folders])
    assert topk.summary.bytes_up < dense.summary.bytes_up
    assert "[1/2] compression.name=none" in captured.err and "[2/2] compression.name=topk" in captured.err


def test_points_are_the_cartesian_product_in_command_line_order():
    axes = [SweepAxis.parse("compression.name=topk,dgc"), SweepAxis.parse("client.lr=0.1, 0.01")]
    points = sweep_points(axes)
    assert [p.folder for p in points] == [
        "compression.name=topk,client.lr=0.1", "compression.name=topk,client.lr=0.01",
        "compression.name=dgc,client.lr=0.1", "compression.name=dgc,client.lr=0.01"]
    tree = points[1].apply({"client": {"lr": 1.0, "batch_size": 8}})
    assert tree == {"client": {"lr": 0.01, "batch_size": 8}, "compression": {"name": "topk"}}
    assert [p.folder for p in sweep_points([SweepAxis.of("data.root", ["/a b", "c"])])] == [
        "data.root=_a_b", "data.root=c"]


@pytest.mark.parametrize("sweeps, message", [
    (["compression.name"], "expected KEY=VALUE1,VALUE2"),
    (["=a,b"], "expected KEY=VALUE1,VALUE2"),
    (["compression..name=a"], "empty key component"),
    (["compression.name="], "empty value"),
    (["compression.name=none,,topk"], "empty value"),
    (["compression.name=topk,topk"], "value 'topk' given twice"),
    (["compression.name=none", "compression.name=topk"], "key swept twice"),
    (["compression.name=none,bogus"], "compression.name=bogus: compression.name: unknown compressor 'bogus'"),
    (["compression.nope=1,2"], "compression.nope=1: compression.nope: unknown key"),
    (["rounds=1,0"], "rounds=0: rounds:"),
])
def test_an_invalid_sweep_is_one_line_and_exit_2_before_anything_runs(scenario_file, tmp_path, capsys,
                                                                       sweeps, message):
    out = tmp_path / "never"
    argv = [str(scenario_file), "--out", str(out), "--quiet"]
    for spec in sweeps:
        argv += ["--sweep", spec]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert not out.exists()


def test_a_missing_scenario_file_is_one_line_and_exit_2(tmp_path, capsys):
    code = main([str(tmp_path / "missing.yaml"), "--sweep", "compression.name=none,topk"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no such scenario file" in err


def test_sweep_axis_errors_name_the_spec():
    with pytest.raises(SweepError, match=r"^--sweep 'seed': expected KEY=VALUE1,VALUE2,\.\.\.$"):
        SweepAxis.parse("seed")


def test_check_validates_every_point_and_runs_nothing(scenario_file, tmp_path, capsys):
    out = tmp_path / "checked"
    code = main([str(scenario_file), "--check", "--out", str(out), "--sweep", "network.profile=3g,wifi"])
    printed = capsys.readouterr().out.splitlines()
    assert code == 0 and not out.exists()
    assert [line.split(": ")[:2] for line in printed] == [["ok", "network.profile=3g"], ["ok", "network.profile=wifi"]]


def test_resume_does_not_apply_to_a_sweep(scenario_file, tmp_path, capsys):
    code = main(["--resume", str(tmp_path), "--sweep", "compression.name=none,topk"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--resume does not apply" in err and "--resume SWEEP_DIR" in err


@pytest.mark.slow
def test_a_killed_sweep_resumes_as_a_sweep(tmp_path):
    """kill -9 while the second of three points runs; ``--resume SWEEP_DIR`` keeps the finished point
    as it was, continues the second from its checkpoint and runs the third: every point's metrics are
    those of an uninterrupted sweep, and the report covers all three."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from .conftest import REPO

    tree = {**TINY, "rounds": 12, "checkpoint_every": 1,
            "model": {"name": "small_cnn"}, "client": {"local_steps": 8, "batch_size": 16, "lr": 0.05}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tree))
    sweep = ["--sweep", "compression.density=0.1,0.05,0.02", "--jobs", "1"]  # one point after the other
    folders = ["compression.density=0.1", "compression.density=0.05", "compression.density=0.02"]
    reference = tmp_path / "reference"
    assert main([str(path), "--out", str(reference), "--quiet", *sweep]) == 0

    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(killed), "--quiet",
                             *sweep], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    second = killed / folders[1] / "metrics.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if second.exists() and len(second.read_text().splitlines()) >= 3:
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.stderr.read().decode()[-500:]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first_summary = (killed / folders[0] / "summary.json").read_bytes()
    assert not (killed / folders[1] / "summary.json").exists() and not (killed / folders[2]).exists()

    done = subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(killed), "--quiet"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "[1/3] compression.density=0.1 (done)" in done.stderr
    assert (killed / folders[0] / "summary.json").read_bytes() == first_summary  # not run again
    for folder in folders:
        assert (killed / folder / "metrics.jsonl").read_bytes() == (reference / folder / "metrics.jsonl").read_bytes()
    assert all(f"| {folder} |" in done.stdout for folder in folders)


@pytest.mark.slow
def test_resuming_a_finished_sweep_reruns_nothing_and_a_bad_plan_is_one_line(scenario_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main([str(scenario_file), "--out", str(out), "--quiet", "--sweep", "compression.name=none,topk"]) == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("metrics.jsonl")}
    capsys.readouterr()
    assert main(["--resume", str(out), "--quiet"]) == 0
    assert {p: p.stat().st_mtime_ns for p in out.rglob("metrics.jsonl")} == before
    assert capsys.readouterr().err.count("(done)") == 2
    (out / "sweep.yaml").write_text("scenario: [1, 2\n")
    assert main(["--resume", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sweep.yaml is malformed" in err


def test_the_same_sweep_command_again_finishes_the_sweep_and_another_is_refused(scenario_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    command = [str(scenario_file), "--out", str(out), "--quiet", "--sweep", "compression.name=none,topk"]
    assert main(command) == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("metrics.jsonl")}
    capsys.readouterr()
    assert main(command) == 0
    assert capsys.readouterr().err.count("(done)") == 2
    assert {p: p.stat().st_mtime_ns for p in out.rglob("metrics.jsonl")} == before
    assert main([*command[:-1], "compression.name=none,dgc"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds another sweep" in err
