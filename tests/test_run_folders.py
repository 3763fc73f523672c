"""Run folders never mix two runs: the default folder is new, ``--out`` to a used folder is refused (or
cleared with ``--overwrite``), and a folder another process is writing is refused (``fedgc.runs.folder``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fedgc.cli.run import main
from fedgc.core.checkpoint import CHECKPOINT
from fedgc.runs.folder import LOCK_NAME, RunLock
from tests.conftest import REPO


def write(path: Path, tree: dict) -> Path:
    path.write_text(yaml.safe_dump(tree))
    return path


def rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@pytest.mark.slow
def test_two_runs_started_in_the_same_second_get_two_folders(tmp_path, tiny_scenario, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20261122-215505")  # the same second, always
    a = write(tmp_path / "a.yaml", {**tiny_scenario, "rounds": 2, "seed": 1})
    b = write(tmp_path / "b.yaml", {**tiny_scenario, "rounds": 3, "seed": 2})
    assert main([str(a), "--quiet"]) == 0
    assert main([str(b), "--quiet"]) == 0
    first, second = tmp_path / "runs" / "tiny-20261122-215505", tmp_path / "runs" / "tiny-20261122-215505-2"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [first.name, second.name]
    assert [r["round"] for r in rows(first)] == [1, 2] and [r["round"] for r in rows(second)] == [1, 2, 3]
    assert yaml.safe_load((first / "scenario.yaml").read_text())["seed"] == 1
    assert yaml.safe_load((second / "scenario.yaml").read_text())["seed"] == 2
    assert f"outputs in {Path('runs') / second.name}" in capsys.readouterr().out  # the human summary's last line


@pytest.mark.slow
def test_two_processes_on_one_out_folder_one_is_refused(tmp_path, tiny_scenario):
    path = write(tmp_path / "s.yaml", {**tiny_scenario, "rounds": 6})
    out = tmp_path / "shared"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(out), "--quiet"]
    procs = [subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, err in results if code == 2)
    assert refused.startswith("error: ") and refused.count("\n") == 1 and "Traceback" not in refused
    assert ("in use by another fedgc process" in refused) or ("already holds files" in refused)
    assert [r["round"] for r in rows(out)] == [1, 2, 3, 4, 5, 6]  # one run's rows, not twelve interleaved


def test_out_holding_a_run_is_refused_and_overwrite_leaves_nothing_of_it(tmp_path, tiny_scenario, capsys):
    out = tmp_path / "run"
    old = write(tmp_path / "old.yaml", {**tiny_scenario, "rounds": 3, "checkpoint_every": 1})
    assert main([str(old), "--out", str(out), "--quiet"]) == 0
    assert (out / CHECKPOINT).is_file()
    (out / "notes.txt").write_text("left by hand")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    new = write(tmp_path / "new.yaml", {**tiny_scenario, "rounds": 2, "checkpoint_every": 0, "seed": 99})
    capsys.readouterr()
    assert main([str(new), "--out", str(out), "--quiet"]) == 2
    err = one_error_line(capsys)
    assert "already holds files" in err and "--overwrite" in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # refused: untouched

    assert main([str(new), "--out", str(out), "--quiet", "--overwrite"]) == 0
    assert not (out / CHECKPOINT).exists() and not (out / "notes.txt").exists()
    assert [r["round"] for r in rows(out)] == [1, 2]
    assert yaml.safe_load((out / "scenario.yaml").read_text())["seed"] == 99
    assert json.loads((out / "summary.json").read_text())["rounds"] == 2
    capsys.readouterr()
    assert main(["--resume", str(out)]) == 2  # the old run's checkpoint cannot be resumed into the new run
    assert "no checkpoint.pt" in one_error_line(capsys)


def test_overwrite_clears_only_fedgc_folders(tmp_path, tiny_scenario, capsys):
    folder = tmp_path / "my-documents"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    path = write(tmp_path / "s.yaml", tiny_scenario)
    assert main([str(path), "--out", str(folder), "--quiet", "--overwrite"]) == 2
    assert "not a fedgc run or sweep folder" in one_error_line(capsys)
    assert (folder / "thesis.tex").read_text() == "precious"
    assert main([str(path), "--overwrite", "--quiet"]) == 2
    assert "--overwrite needs --out" in one_error_line(capsys)


def test_a_folder_in_use_is_refused_for_a_run_a_resume_and_an_overwrite(tmp_path, tiny_scenario, capsys):
    out = tmp_path / "run"
    path = write(tmp_path / "s.yaml", {**tiny_scenario, "rounds": 2, "checkpoint_every": 1})
    assert main([str(path), "--out", str(out), "--quiet"]) == 0
    metrics = (out / "metrics.jsonl").read_bytes()
    capsys.readouterr()
    with RunLock(out):  # another process writing the folder (flock locks conflict across open files)
        for argv in (["--resume", str(out)], [str(path), "--out", str(out), "--quiet", "--overwrite"]):
            assert main(argv) == 2
            assert "in use by another fedgc process" in one_error_line(capsys)
    assert (out / "metrics.jsonl").read_bytes() == metrics
    assert main(["--resume", str(out)]) == 0  # released: the lock does not outlive its holder
    assert not (out / LOCK_NAME).exists()  # and its file is removed when the run ends (issue 27)


def test_the_lock_file_is_removed_by_its_holder_only(tmp_path):
    import fcntl

    folder = tmp_path / "run"
    folder.mkdir()
    holder = RunLock(folder)
    with pytest.raises(ValueError, match="in use by another fedgc process"):
        RunLock(folder)
    assert (folder / LOCK_NAME).is_file()  # the refused process removed nothing
    stale = os.open(folder / LOCK_NAME, os.O_RDWR)  # a waiter that opened the file before it was removed
    holder.release()
    assert not (folder / LOCK_NAME).exists()
    real_open = RunLock._open_and_lock
    calls = []

    def late_waiter(self):  # its first lock is on the removed file, as if it raced the release
        calls.append(1)
        if len(calls) == 1:
            fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return stale
        return real_open(self)

    RunLock._open_and_lock = late_waiter
    try:
        waiter = RunLock(folder)  # sees that its file was removed and locks the folder's new lock file
    finally:
        RunLock._open_and_lock = real_open
    assert len(calls) == 2 and (folder / LOCK_NAME).is_file()
    with pytest.raises(ValueError, match="in use by another fedgc process"):
        RunLock(folder)  # one holder at a time, still
    waiter.release()
    assert not (folder / LOCK_NAME).exists()


@pytest.mark.slow
def test_resume_of_a_running_run_is_refused(tmp_path, tiny_scenario):
    scenario = {**tiny_scenario, "rounds": 100_000, "checkpoint_every": 1}
    path = write(tmp_path / "s.yaml", scenario)
    out = tmp_path / "running"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(out), "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (out / CHECKPOINT).exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None and (out / CHECKPOINT).exists()
        resumed = subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(out)], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=120, check=False)
        assert proc.poll() is None, "the run must still be running while the resume is refused"
    finally:
        proc.kill()
        proc.wait()
    assert resumed.returncode == 2, resumed.stderr
    assert resumed.stderr.startswith("error: ") and resumed.stderr.count("\n") == 1
    assert f"(pid {proc.pid})" in resumed.stderr


@pytest.mark.slow
def test_sweeps_get_their_own_folders_and_refuse_a_used_one(tmp_path, tiny_scenario, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20261122-215505")
    path = write(tmp_path / "s.yaml", {**tiny_scenario, "rounds": 1})
    sweep = ["--sweep", "compression.name=none,topk", "--quiet"]
    assert main([str(path), *sweep]) == 0
    assert main([str(path), *sweep]) == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["tiny-20261122-215505", "tiny-20261122-215505-2"]
    out = tmp_path / "runs" / "tiny-20261122-215505"
    report = (out / "report.md").read_bytes()
    capsys.readouterr()
    assert main([str(path), "--out", str(out), *sweep]) == 0  # the same sweep: it is finished, nothing runs again
    assert capsys.readouterr().err.count("(done)") == 2 and (out / "report.md").read_bytes() == report
    assert main([str(path), "--out", str(out), "--sweep", "compression.name=none,dgc", "--quiet"]) == 2
    assert "holds another sweep" in one_error_line(capsys)
    (out / "sweep.yaml").unlink()  # not a sweep folder any more: a folder holding files
    assert main([str(path), "--out", str(out), *sweep]) == 2
    assert "already holds files" in one_error_line(capsys)
    assert (out / "report.md").read_bytes() == report
    with RunLock(out):
        assert main([str(path), "--out", str(out), "--overwrite", *sweep]) == 2
        assert "in use" in one_error_line(capsys)
    (out / "compression.name=none" / "stale.txt").write_text("x")
    assert main([str(path), "--out", str(out), "--overwrite", *sweep]) == 0
    assert not (out / "compression.name=none" / "stale.txt").exists()


def test_run_point_from_python_replaces_an_earlier_run_in_its_folder(tmp_path, tiny_scenario):
    from fedgc.scenario.model import validate
    from fedgc.sweeps.runner import run_point

    folder = tmp_path / "nb"
    run_point(validate({**tiny_scenario, "rounds": 3, "checkpoint_every": 1}), folder)
    assert (folder / CHECKPOINT).exists()
    run_point(validate({**tiny_scenario, "rounds": 1, "checkpoint_every": 0}), folder)
    assert not (folder / CHECKPOINT).exists() and [r["round"] for r in rows(folder)] == [1]
