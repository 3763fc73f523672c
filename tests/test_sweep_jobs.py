"""``--jobs N`` (fedgc/sweeps/jobs.py): a sweep's points run in N processes and write the same rows as
one at a time; results come back in the sweep's order; the first failure stops the sweep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from fedgc.cli.run import main
from fedgc.sweeps.jobs import default_jobs, parse_jobs, run_all
from tests.test_sweep import TINY

SAME_FILES = ("scenario.yaml", "metrics.jsonl", "clients.jsonl", "model.pt")


def test_results_come_back_in_order_and_the_first_failure_is_raised():
    started = []
    assert run_all(math.factorial, [5, 1, 3], 2, started.append) == [120, 1, 6]
    assert started == [0, 1, 2]
    with pytest.raises(ValueError, match="factorial"):
        run_all(math.factorial, [3, -1, 2], 2)
    assert run_all(math.factorial, [4], 8) == [24]  # one task: no process started
    assert default_jobs() >= 1 and parse_jobs("3") == 3
    with pytest.raises(Exception, match="whole number"):
        parse_jobs("0")


def _sweep(tmp_path: Path, jobs: int, capsys) -> Path:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(TINY))
    out = tmp_path / f"jobs{jobs}"
    code = main([str(scenario), "--out", str(out), "--quiet", "--set", "rounds=2", "--jobs", str(jobs),
                 "--sweep", "compression.name=none,topk", "--seeds", "3,4"])
    assert code == 0, capsys.readouterr().err
    return out


@pytest.mark.slow
def test_a_sweep_with_jobs_2_writes_the_same_rows_as_with_jobs_1(tmp_path, capsys):
    serial, parallel = _sweep(tmp_path, 1, capsys), _sweep(tmp_path, 2, capsys)
    folders = sorted(p.name for p in serial.iterdir() if p.is_dir())
    assert len(folders) == 4 and folders == sorted(p.name for p in parallel.iterdir() if p.is_dir())
    for folder in folders:
        for name in SAME_FILES:
            assert (serial / folder / name).read_bytes() == (parallel / folder / name).read_bytes(), (folder, name)
        one, two = (json.loads((out / folder / "summary.json").read_text()) for out in (serial, parallel))
        assert {k: v for k, v in one.items() if "wall" not in k} == {k: v for k, v in two.items() if "wall" not in k}
    report = [(out / "report.md").read_text().replace(str(out), "OUT") for out in (serial, parallel)]
    assert report[0] == report[1]


@pytest.mark.slow
def test_a_killed_parallel_sweep_leaves_no_worker_running_and_resumes_to_the_serial_rows(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    tree = {**TINY, "rounds": 10, "checkpoint_every": 1,
            "model": {"name": "small_cnn"}, "client": {"local_steps": 8, "batch_size": 16, "lr": 0.05}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tree))
    sweep = ["--sweep", "compression.density=0.1,0.05"]
    folders = ["compression.density=0.1", "compression.density=0.05"]
    assert main([str(path), "--out", str(tmp_path / "reference"), "--quiet", "--jobs", "1", *sweep]) == 0
    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(killed), "--quiet",
                             "--jobs", "2", *sweep], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    metrics = [killed / f / "metrics.jsonl" for f in folders]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if all(m.exists() and len(m.read_text().splitlines()) >= 2 for m in metrics):
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(3)  # the workers die with their fork server, which ends with the sweep
    sizes = [m.stat().st_size for m in metrics]
    time.sleep(3)
    assert [m.stat().st_size for m in metrics] == sizes, "a worker kept running after the sweep was killed"
    assert not any((killed / f / "summary.json").exists() for f in folders)
    done = subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(killed), "--quiet", "--jobs", "2"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    for folder in folders:
        assert (killed / folder / "metrics.jsonl").read_bytes() == \
            (tmp_path / "reference" / folder / "metrics.jsonl").read_bytes()


@pytest.mark.slow
def test_an_interrupted_point_stops_the_sweep_and_resumes_from_its_checkpoint(tmp_path, monkeypatch, capsys):
    from fedgc.sweeps import runner as sweep

    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump({**TINY, "rounds": 3, "checkpoint_every": 1}))
    out = tmp_path / "out"
    assert main([str(scenario), "--out", str(out), "--quiet", "--jobs", "1", "--sweep", "client.lr=0.1"]) == 0
    point = out / "client.lr=0.1"
    metrics = (point / "metrics.jsonl").read_bytes()
    summary = json.loads((point / "summary.json").read_text())
    (point / "summary.json").write_text(json.dumps({**summary, "stopped_reason": "interrupted"}))
    assert main(["--resume", str(out), "--quiet"]) == 0  # not read back as done: continued from its checkpoint
    assert json.loads((point / "summary.json").read_text())["stopped_reason"] == "completed"
    assert (point / "metrics.jsonl").read_bytes() == metrics
    interrupted = type("S", (), {"stopped_reason": "interrupted"})()
    monkeypatch.setattr(sweep, "_run_or_resume", lambda *args, **kwargs: interrupted)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C in a point stops the whole sweep
        sweep._point_task((None, None, tmp_path, True, False, None))  # no plugins to carry
