"""Checkpoints: a run killed at any moment resumes from its last checkpoint and produces exactly the
metrics of a run that was never interrupted (same scenario, same seed)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from fedgc.flower.checkpoint import CHECKPOINT
from fedgc.simulate import main
from tests.conftest import REPO


def stateful_scenario(tiny: dict, rounds: int, every: int) -> dict:
    """Every kind of state a resume must restore: DGC momentum and residuals with warm-up, pending
    updates of cut clients, server momentum, a Gilbert-Elliott channel, on/off churn, over-selection."""
    tiny = dict(tiny)
    tiny.update(rounds=rounds, checkpoint_every=every)
    tiny["data"] = {"dataset": "digits", "num_clients": 6, "partition": "dirichlet", "alpha": 0.5}
    tiny["compression"] = {"name": "dgc", "density": 0.05, "warmup_rounds": 2, "clip_norm": 5.0}
    tiny["strategy"] = {"fraction": 0.5, "server_optimizer": "momentum", "server_lr": 1.0}
    tiny["network"] = {"profile": "3g", "link": "gilbert_elliott", "availability": "exponential",
                       "mean_on_s": 20.0, "mean_off_s": 5.0, "over_selection": 1.5}
    return tiny


def write(path: Path, tree: dict) -> Path:
    path.write_text(yaml.safe_dump(tree))
    return path


def run_cli(*args: str) -> int:
    return main([*args, "--quiet"]) if args[0] != "--resume" else main([*args])


@pytest.mark.parametrize(("server_optimizer", "downlink"), [
    ("momentum", "none"), ("adam", "none"),
    ("momentum", "topk"),  # the server's per-client replicas and the clients' replicas are restored too
])
def test_resume_from_a_mid_run_checkpoint_reproduces_the_metrics(tmp_path, tiny_scenario, server_optimizer, downlink):
    scenario = stateful_scenario(tiny_scenario, rounds=6, every=3)
    scenario["strategy"]["server_optimizer"] = server_optimizer
    scenario["downlink"] = {"name": downlink, "density": 0.05}
    path = write(tmp_path / "s.yaml", scenario)
    full = tmp_path / "full"
    assert run_cli(str(path), "--out", str(full)) == 0
    assert (full / CHECKPOINT).is_file(), "a checkpoint is written every 3 rounds"
    assert torch.load(full / CHECKPOINT, weights_only=False)["round"] == 3
    # A crash after round 5: the folder holds the round-3 checkpoint and five rows of metrics.
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for name in ("scenario.yaml", CHECKPOINT):
        shutil.copy(full / name, crashed / name)
    lines = (full / "metrics.jsonl").read_text().splitlines(keepends=True)
    (crashed / "metrics.jsonl").write_text("".join(lines[:5]) + lines[5][:17])  # a torn last line too
    assert run_cli("--resume", str(crashed)) == 0
    assert (crashed / "metrics.jsonl").read_bytes() == (full / "metrics.jsonl").read_bytes()
    final, resumed = torch.load(full / "model.pt"), torch.load(crashed / "model.pt")
    assert all(torch.equal(final[k], resumed[k]) for k in final)


def test_sigkill_mid_run_then_resume_gives_identical_metrics(tmp_path, tiny_scenario):
    scenario = stateful_scenario(tiny_scenario, rounds=40, every=2)
    scenario["model"] = {"name": "small_cnn"}
    scenario["client"] = {"local_steps": 10, "batch_size": 16, "lr": 0.05}
    path = write(tmp_path / "s.yaml", scenario)
    reference = tmp_path / "reference"
    assert run_cli(str(path), "--out", str(reference)) == 0

    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.simulate", str(path), "--out", str(killed), "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    metrics = killed / "metrics.jsonl"
    deadline = time.monotonic() + 120
    rows_at_kill = 0
    while time.monotonic() < deadline and proc.poll() is None:
        rows_at_kill = len(metrics.read_text().splitlines()) if metrics.exists() else 0
        if rows_at_kill >= 5:
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-500:]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 5 <= rows_at_kill < 40
    assert (killed / CHECKPOINT).is_file()
    assert not (killed / "summary.json").exists()

    done = subprocess.run([sys.executable, "-m", "fedgc.simulate", "--resume", str(killed), "--quiet"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert metrics.read_bytes() == (reference / "metrics.jsonl").read_bytes()


def test_resume_without_a_checkpoint_is_a_one_line_error(tmp_path, tiny_scenario, capsys):
    path = write(tmp_path / "s.yaml", {**tiny_scenario, "checkpoint_every": 0})
    out = tmp_path / "run"
    assert run_cli(str(path), "--out", str(out)) == 0
    assert not (out / CHECKPOINT).exists()
    capsys.readouterr()
    assert run_cli("--resume", str(out)) == 2
    err = capsys.readouterr().err.strip()
    assert "no checkpoint.pt" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"\x80\x04K\x01."])
def test_a_corrupt_checkpoint_is_a_one_line_error(tmp_path, tiny_scenario, capsys, content):
    path = write(tmp_path / "s.yaml", {**tiny_scenario, "rounds": 3, "checkpoint_every": 1})
    out = tmp_path / "run"
    assert run_cli(str(path), "--out", str(out)) == 0
    (out / CHECKPOINT).write_bytes(content)
    capsys.readouterr()
    assert run_cli("--resume", str(out)) == 2
    err = capsys.readouterr().err.strip()
    assert CHECKPOINT in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_resume_and_a_scenario_together_are_refused(tmp_path, capsys):
    assert main(["s.yaml", "--resume", str(tmp_path)]) == 2
    assert main([]) == 2
    assert main(["--resume", str(tmp_path), "--set", "rounds=3"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 3


def test_divergence_keeps_the_last_good_checkpoint_and_model(tmp_path, tiny_scenario, capsys):
    # FedAdam with an absurd server learning rate: the weights grow by ~1e35 a round until the
    # logistic regression's logits overflow (round 3 on this seed).
    scenario = {**tiny_scenario, "rounds": 30, "checkpoint_every": 1, "model": {"name": "logreg"},
                "compression": {"name": "none"},
                "strategy": {"fraction": 1.0, "server_optimizer": "adam", "server_lr": 1e35}}
    out = tmp_path / "run"
    assert run_cli(str(write(tmp_path / "s.yaml", scenario)), "--out", str(out)) == 3
    assert "diverged: round 3" in capsys.readouterr().err
    state = torch.load(out / CHECKPOINT, weights_only=False)
    assert state["round"] == 2 and len((out / "metrics.jsonl").read_text().splitlines()) == 3
    kept = torch.load(out / "model.pt")
    assert all(torch.isfinite(w).all() and torch.equal(w, state["weights"][k]) for k, w in kept.items())


def test_resume_with_retried_rounds_reproduces_the_metrics(tmp_path, tiny_scenario):
    scenario = stateful_scenario(tiny_scenario, rounds=6, every=2)
    scenario["strategy"].update(min_clients=3, too_few="retry", max_retries=2)
    scenario["network"].update(mean_on_s=3.0, mean_off_s=3.0, over_selection=1.0)
    path = write(tmp_path / "s.yaml", scenario)
    full = tmp_path / "full"
    assert run_cli(str(path), "--out", str(full)) == 0
    lines = (full / "metrics.jsonl").read_text().splitlines(keepends=True)
    state = torch.load(full / CHECKPOINT, weights_only=False)
    assert state["round"] == 4 and state["metrics_rows"] > 4, "some rounds were retried before the checkpoint"
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for name in ("scenario.yaml", CHECKPOINT):
        shutil.copy(full / name, crashed / name)
    (crashed / "metrics.jsonl").write_text("".join(lines[:-1]))
    assert run_cli("--resume", str(crashed)) == 0
    assert (crashed / "metrics.jsonl").read_bytes() == (full / "metrics.jsonl").read_bytes()
