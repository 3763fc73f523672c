"""Checkpoints: a run killed at any moment resumes from its last checkpoint and produces exactly the
metrics of a run that was never interrupted (same scenario, same seed)."""

from __future__ import annotations

import json
import math
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

from fedgc.cli.run import main
from fedgc.core.checkpoint import CHECKPOINT
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


def checkpoint_state(run_dir: Path) -> dict:
    """The run part of the checkpoint (rounds done, metrics rows, global model), read the way a resume
    reads it (plain data only)."""
    from fedgc.core.checkpoint import read_file

    return read_file(run_dir / CHECKPOINT)[0]["state"]["run"]


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
    assert checkpoint_state(full)["round"] == 3
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


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_gives_identical_metrics(tmp_path, tiny_scenario):
    scenario = stateful_scenario(tiny_scenario, rounds=40, every=2)
    scenario["model"] = {"name": "small_cnn"}
    scenario["client"] = {"local_steps": 10, "batch_size": 16, "lr": 0.05}
    path = write(tmp_path / "s.yaml", scenario)
    reference = tmp_path / "reference"
    assert run_cli(str(path), "--out", str(reference)) == 0

    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(killed), "--quiet"],
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

    done = subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(killed), "--quiet"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert metrics.read_bytes() == (reference / "metrics.jsonl").read_bytes()
    assert (killed / "clients.jsonl").read_bytes() == (reference / "clients.jsonl").read_bytes()


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
    assert main(["--resume", str(tmp_path), "--out", str(tmp_path / "elsewhere")]) == 2
    assert main(["--resume", str(tmp_path), "--overwrite"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 5 and all(line.startswith("error: ") for line in err)
    assert not (tmp_path / "elsewhere").exists()


def test_divergence_keeps_the_last_good_checkpoint_and_model(tmp_path, tiny_scenario, capsys):
    # FedAdam with an absurd server learning rate: the weights grow by ~1e35 a round until the
    # logistic regression's logits overflow (round 3 on this seed).
    scenario = {**tiny_scenario, "rounds": 30, "checkpoint_every": 1, "model": {"name": "logreg"},
                "compression": {"name": "none"},
                "strategy": {"fraction": 1.0, "server_optimizer": "adam", "server_lr": 1e35}}
    out = tmp_path / "run"
    assert run_cli(str(write(tmp_path / "s.yaml", scenario)), "--out", str(out)) == 3
    assert "diverged: round 3" in capsys.readouterr().err
    state = checkpoint_state(out)
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
    state = checkpoint_state(full)
    assert state["round"] == 4 and state["metrics_rows"] > 4, "some rounds were retried before the checkpoint"
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for name in ("scenario.yaml", CHECKPOINT):
        shutil.copy(full / name, crashed / name)
    (crashed / "metrics.jsonl").write_text("".join(lines[:-1]))
    assert run_cli("--resume", str(crashed)) == 0
    assert (crashed / "metrics.jsonl").read_bytes() == (full / "metrics.jsonl").read_bytes()


# The network section as a run folder written before the tagged sections holds it (scenario.yaml and the
# checkpoint's scenario record): every flat key, with stateful_scenario's values.
FLAT_NETWORK = {
    "profile": "3g", "link": "gilbert_elliott", "up_mbps": None, "down_mbps": None, "rtt_ms": None, "jitter_ms": 0.0,
    "bandwidth_spread": 0.0, "bandwidth_file": None, "ge_mean_good_s": 10.0, "ge_mean_bad_s": 2.0,
    "ge_bad_factor": 0.1, "ge_good_loss": 0.0, "ge_bad_loss": 0.05, "trace_down": [], "trace_up": None,
    "trace_format": "pensieve", "trace_unit": None, "trace_dir": None, "trace_random_start": True,
    "server_up_mbps": None, "server_down_mbps": None, "device_samples_per_s": 500.0, "device_tier": None,
    "device_file": None, "device_file_scale": 3.0, "availability": "exponential", "mean_on_s": 20.0,
    "mean_off_s": 5.0, "availability_file": None, "availability_period_s": None, "protocol": "ideal",
    "pull_interval_s": 3.0, "requests_down": 3, "requests_up": 2, "reply_poll_s": 0.05, "pull_backoff_s": 1.0,
    "pull_backoff_cap_s": 10.0, "deadline_s": None, "over_selection": 1.5,
}


@pytest.mark.slow
@pytest.mark.parametrize(("flat_changes", "named"), [({}, None), ({"ge_bad_factor": 0.2}, "network.link.bad_factor")])
def test_a_run_folder_with_the_flat_network_section_resumes(tmp_path, tiny_scenario, flat_changes, named, capsys):
    """A run folder from before the tagged network sections resumes to the uninterrupted metrics; a
    checkpoint whose network really differs is still refused, naming the key in today's form."""
    from fedgc.core.resume_check import fingerprint, flat_fields

    full = tmp_path / "full"
    assert run_cli(str(write(tmp_path / "s.yaml", stateful_scenario(tiny_scenario, rounds=6, every=2))),
                   "--out", str(full)) == 0
    old = tmp_path / "old"
    old.mkdir()
    tree = yaml.safe_load((full / "scenario.yaml").read_text())
    tree["network"] = dict(FLAT_NETWORK)
    write(old / "scenario.yaml", tree)
    from fedgc.core.checkpoint import read_file, write_file

    payload, _ = read_file(full / CHECKPOINT)
    fields = flat_fields({**tree, "network": {**FLAT_NETWORK, **flat_changes}})
    payload["scenario"] = {**payload["scenario"], "fields": fields, "fingerprint": fingerprint(fields)}
    write_file(old / CHECKPOINT, payload)
    rows = (full / "metrics.jsonl").read_text().splitlines(keepends=True)
    (old / "metrics.jsonl").write_text("".join(rows[:payload["state"]["run"]["metrics_rows"]]))
    capsys.readouterr()
    code = run_cli("--resume", str(old))
    if named is None:
        assert code == 0 and (old / "metrics.jsonl").read_bytes() == (full / "metrics.jsonl").read_bytes()
    else:
        err = capsys.readouterr().err
        assert code == 2 and f"in {named};" in err and err.count("\n") == 1, err


def _completed_run(tmp_path, tiny, rounds=4, every=2) -> tuple[Path, dict]:
    scenario = {**tiny, "rounds": rounds, "checkpoint_every": every}
    out = tmp_path / "run"
    assert run_cli(str(write(tmp_path / "s.yaml", scenario)), "--out", str(out)) == 0
    return out, {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


def _edit_scenario(run_dir: Path, **changes) -> None:
    tree = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    for dotted, value in changes.items():
        *sections, key = dotted.split("__")
        node = tree
        for section in sections:
            node = node[section]
        node[key] = value
    write(run_dir / "scenario.yaml", tree)


@pytest.mark.parametrize(("changes", "named"), [
    ({"rounds": 1}, "rounds: lowered from 4 to 1"),  # below the checkpoint's round 2
    ({"rounds": 3}, "rounds: lowered from 4 to 3"),  # would cut rows of a completed run
    ({"network__profile": "3g"}, "in network.profile;"),
    ({"model__name": "logreg"}, "in model.name;"),
    ({"seed": 8, "compression__density": 0.5}, "in compression.density, seed;"),
])
def test_resume_with_an_edited_scenario_is_refused_and_changes_nothing(tmp_path, tiny_scenario, capsys, changes,
                                                                      named):
    out, before = _completed_run(tmp_path, tiny_scenario)
    _edit_scenario(out, **changes)
    before["scenario.yaml"] = (out / "scenario.yaml").read_bytes()
    capsys.readouterr()
    assert run_cli("--resume", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err and named in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


@pytest.mark.slow
def test_raising_rounds_extends_a_run_like_a_run_started_with_more_rounds(tmp_path, tiny_scenario):
    out, _ = _completed_run(tmp_path, tiny_scenario, rounds=4, every=2)
    _edit_scenario(out, rounds=7, checkpoint_every=3, eval__target_accuracy=0.6)
    assert run_cli("--resume", str(out)) == 0
    fresh = tmp_path / "fresh"
    tree = yaml.safe_load((out / "scenario.yaml").read_text())
    assert run_cli(str(write(tmp_path / "fresh.yaml", tree)), "--out", str(fresh)) == 0
    assert (out / "metrics.jsonl").read_bytes() == (fresh / "metrics.jsonl").read_bytes()
    assert json.loads((out / "summary.json").read_text())["rounds"] == 7
    final, extended = torch.load(fresh / "model.pt"), torch.load(out / "model.pt")
    assert all(torch.equal(final[k], extended[k]) for k in final)


@pytest.mark.parametrize(("lowered_to", "refused"), [
    (5, None),  # down to the last round written: the run ends there
    (6, None),
    (4, "rounds: lowered from 8 to 4"),  # would delete round 5, written after the checkpoint
    (2, "rounds: lowered from 8 to 2"),  # below the checkpoint's round 3
])
def test_lowering_rounds_of_a_stopped_run_ends_it_like_a_run_started_with_fewer_rounds(
        tmp_path, tiny_scenario, capsys, lowered_to, refused):
    """An 8-round run stopped after round 5 (its checkpoint at round 3) may be given fewer rounds, never
    fewer than it has written: it then ends as a run started with them would; a refusal changes nothing."""
    stopped, _ = _completed_run(tmp_path, tiny_scenario, rounds=5, every=3)
    # What an 8-round run killed after round 5 leaves: rounds is not in the fingerprint, so only the
    # checkpoint's record of it and scenario.yaml say 8; a killed run has no summary.json or model.pt.
    _rewrite_checkpoint(stopped, lambda p: p["scenario"].update(rounds=8))
    _edit_scenario(stopped, rounds=8)
    for name in ("summary.json", "model.pt"):
        (stopped / name).unlink()
    _edit_scenario(stopped, rounds=lowered_to)
    before = {p.name: p.read_bytes() for p in stopped.iterdir() if p.is_file()}
    capsys.readouterr()
    code = run_cli("--resume", str(stopped))
    err = capsys.readouterr().err
    if refused:
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and refused in err, err
        assert {p.name: p.read_bytes() for p in stopped.iterdir() if p.is_file()} == before
        return
    assert code == 0, err
    fresh = tmp_path / "fresh"
    tree = yaml.safe_load((stopped / "scenario.yaml").read_text())
    assert run_cli(str(write(tmp_path / "fresh.yaml", tree)), "--out", str(fresh)) == 0
    assert (stopped / "metrics.jsonl").read_bytes() == (fresh / "metrics.jsonl").read_bytes()
    assert json.loads((stopped / "summary.json").read_text())["rounds"] == lowered_to
    final, ended = torch.load(fresh / "model.pt"), torch.load(stopped / "model.pt")
    assert all(torch.equal(final[k], ended[k]) for k in final)


def _rewrite_checkpoint(run_dir: Path, edit) -> None:
    """Edit the checkpoint as a forger would: with a digest header that matches the edited bytes (so the
    checks behind the digest are what refuses it)."""
    from fedgc.core.checkpoint import read_file, write_file

    payload, _ = read_file(run_dir / CHECKPOINT)
    edit(payload)
    write_file(run_dir / CHECKPOINT, payload)


def _client_memory(payload: dict) -> dict:
    """Client 1's compression memory in a checkpoint's payload (its tensors by name)."""
    return payload["state"]["transport"]["contexts"][1]["arrays"]["fedgc.memory"]


@pytest.mark.parametrize(("edit", "named"), [
    (lambda p: p["state"]["run"]["weights"].update(extra=torch.zeros(3)), "an unknown extra"),
    (lambda p: p["state"]["run"]["weights"].pop(next(iter(p["state"]["run"]["weights"]))), "its model has no "),
    (lambda p: p["state"]["run"]["weights"].update({k: torch.zeros(2, 2) for k in list(p["state"]["run"]["weights"])[:1]}),
     "has shape (2, 2)"),
    (lambda p: p.update(format=1), "has format 1, this fedgc reads formats 3 and 4 only"),
    (lambda p: p.update(format=2), "has format 2, this fedgc reads formats 3 and 4 only"),  # the flat format before parts
    (lambda p: p.update(format=3), "has format 3, this fedgc reads formats 3 and 4 only"),  # 3 has no digest header
    (lambda p: p["state"]["run"].update(round=10**9), "is past the scenario's"),
    (lambda p: p["state"].pop("network"), "is malformed"),
    (lambda p: p["state"]["run"].update(round="3"), "is malformed"),
    (lambda p: p["state"]["transport"].update(contexts={1: {"arrays": 5}}), "is malformed"),
    # a client's compression memory (topk's residual) that its ClientApp would refuse every round
    (lambda p: _client_memory(p).update({"residual/net.1.weight": torch.zeros(3)}),
     "client 1's state: the restored memory 'residual/net.1.weight' has shape (3,), its parameter (128, 64)"),
    (lambda p: _client_memory(p).update({"residual/net.3.bias": torch.full((10,), math.nan)}),
     "client 1's state: the restored memory 'residual/net.3.bias' holds NaN or infinity"),
    (lambda p: _client_memory(p).update({"residual/ghost": torch.zeros(3)}),
     "client 1's state: the restored memory 'residual/ghost' names no parameter of the model"),
    (lambda p: _client_memory(p).update({"sparse-indices/residual/net.1.weight": torch.zeros(1, dtype=torch.int64),
                                         "sparse-values/residual/net.1.weight": torch.ones(1),
                                         "sparse-shape/residual/net.1.weight": torch.tensor([10**6, 10**6])}),
     "client 1's state: the stored fedgc.memory: state tensor 'residual/net.1.weight' declares a shape beyond"),
    (lambda p: p["state"]["network"]["clients"][1].update({"class": "os:system"}), "which is not allowed"),
    # a garbage RNG state (the strategy's selection generator)
    (lambda p: p["state"]["strategy"].update(rng="garbage"), "is malformed (strategy"),
    (lambda p: p["state"]["strategy"]["rng"]["state"].update(state=-1, inc="x"), "is malformed (strategy"),
    (lambda p: p["state"]["strategy"]["rng"]["state"].update(state=2**200), "is malformed (strategy"),
    (lambda p: p["state"]["strategy"]["rng"].update(bit_generator="os.system"), "is malformed (strategy"),
])
def test_a_checkpoint_that_does_not_fit_is_a_one_line_error(tmp_path, tiny_scenario, capsys, edit, named):
    out, _ = _completed_run(tmp_path, tiny_scenario)
    _rewrite_checkpoint(out, edit)
    capsys.readouterr()
    assert run_cli("--resume", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err and named in err, err


def test_a_checkpoint_with_any_byte_flipped_is_refused_and_changes_nothing(tmp_path, tiny_scenario, capsys):
    """One byte flipped at 24 places spread over the file (header, pickle, tensors, zip directory): each
    resume is refused in one line naming the file, and the folder is left as it was."""
    out, _ = _completed_run(tmp_path, tiny_scenario)
    original = (out / CHECKPOINT).read_bytes()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".fedgc.lock"}
    for position in sorted({*range(0, len(original), max(1, len(original) // 20)), 5, len(original) - 1}):
        damaged = bytearray(original)
        damaged[position] ^= 0x01
        (out / CHECKPOINT).write_bytes(bytes(damaged))
        capsys.readouterr()
        assert run_cli("--resume", str(out)) == 2, position
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and CHECKPOINT in err, (position, err)
    (out / CHECKPOINT).write_bytes(original)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".fedgc.lock"} == before


def test_a_checkpoint_whose_client_states_were_swapped_is_refused(tmp_path, tiny_scenario, capsys):
    """Two clients' states (compression memories) swapped in the payload, the header left as written:
    the digest no longer matches, and the resume is refused in one line naming the file. (Swapped by
    someone who also rewrites the header, the states fit structurally and would be taken: see
    docs/reliability.md, the digest detects change, not forgery.)"""
    from fedgc.core.checkpoint import HEADER_BYTES

    out, _ = _completed_run(tmp_path, tiny_scenario)
    header = (out / CHECKPOINT).read_bytes()[:HEADER_BYTES]

    def swap(payload):
        contexts = payload["state"]["transport"]["contexts"]
        contexts[1], contexts[2] = contexts[2], contexts[1]

    _rewrite_checkpoint(out, swap)
    (out / CHECKPOINT).write_bytes(header + (out / CHECKPOINT).read_bytes()[HEADER_BYTES:])
    capsys.readouterr()
    assert run_cli("--resume", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "was changed after it was written" in err, err


def test_a_failed_checkpoint_write_is_one_line_and_keeps_the_previous_checkpoint(tmp_path):
    """ENOSPC (or PyTorch's RuntimeError for it) while writing: one line naming the file, no .tmp left,
    the previous checkpoint byte for byte."""
    from fedgc.core.checkpoint import CheckpointWriteError, write_file

    path = tmp_path / CHECKPOINT
    write_file(path, {"format": 4, "x": torch.zeros(3)})
    before = path.read_bytes()

    class NoSpace:
        def __reduce__(self):
            raise OSError(28, "No space left on device")

    with pytest.raises(CheckpointWriteError, match=r"checkpoint.pt: cannot write the checkpoint \(No space left"):
        write_file(path, {"format": 4, "x": NoSpace()})
    assert path.read_bytes() == before and not (tmp_path / (CHECKPOINT + ".tmp")).exists()


class _RunsCode:
    """Unpickling this object runs code: it creates the file ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_a_checkpoint_holding_a_code_running_object_is_refused_and_the_code_does_not_run(tmp_path, tiny_scenario,
                                                                                         capsys):
    out, _ = _completed_run(tmp_path, tiny_scenario)
    marker = tmp_path / "code-ran"
    _rewrite_checkpoint(out, lambda p: p["state"]["transport"].update(next_message_id=_RunsCode(marker)))
    capsys.readouterr()
    assert run_cli("--resume", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "not a plain-data checkpoint" in err
    assert not marker.exists()
    # The file is live: an unpickling load (what format 1 did) would have run it.
    from fedgc.core.checkpoint import read_file

    read_file(out / CHECKPOINT, weights_only=False)
    assert marker.read_text() == "ran"


@pytest.mark.parametrize(("content", "expected"), [
    (None, 0),  # no metrics.jsonl
    (b"", 0),
    (b'{"round": 1}\n{"round": 2}\n', 2),
    (b'{"round": 1}\n{"round": 2}\n{"rou', 2),  # a row torn by a kill is not counted
    (b'{"round": 1}\n{"rou\n', None),  # an unreadable whole row: unknown, so rounds may not be lowered
    (b'{"round": 1}\n[7]\n', None),
    (b'{"round": -3}\n', None),
    (b'{"round": true}\n', None),
    (b"\n" * (300 * 1024), None),  # nothing but blank lines in the tail it reads
    ("fifo", None),  # read without blocking, and refused
])
def test_the_last_round_written_is_read_from_the_tail_of_metrics_and_unknown_when_unreadable(tmp_path, content,
                                                                                           expected):
    from fedgc.core.checkpoint import last_round_written

    if content == "fifo":
        os.mkfifo(tmp_path / "metrics.jsonl")
    elif content is not None:
        (tmp_path / "metrics.jsonl").write_bytes(content)
    assert last_round_written(tmp_path) == expected
