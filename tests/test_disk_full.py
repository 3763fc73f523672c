"""A full disk anywhere in a run (the lock file, metrics, clients, checkpoint, model, plots) is one line
naming the file, exit 2; nothing half-written is left for a resume to take, the previous checkpoint
is kept, and once there is room again ``--resume`` ends with the uninterrupted run's metrics.

The disk is a small tmpfs mounted by the test (root only; skipped otherwise), filled so that the run
meets the end of it at different moments."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest
import yaml

from .conftest import REPO

SIZE_KIB = 600
SCENARIO = {"name": "tiny", "seed": 7, "rounds": 6, "checkpoint_every": 1,
            "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"}, "model": {"name": "mlp"},
            "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
            "compression": {"name": "topk", "density": 0.05}, "eval": {"target_accuracy": 0.5}}


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_KIB}k", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.decode(errors='replace').strip()[:80]})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def simulate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fedgc.cli.run", *args, "--quiet"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> bytes:
    """The uninterrupted run's metrics.jsonl, run once for every fill level (on a disk with room)."""
    folder = tmp_path_factory.mktemp("disk-full")
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    done = simulate(str(path), "--out", str(folder / "reference"))
    assert done.returncode == 0, done.stderr
    return (folder / "reference" / "metrics.jsonl").read_bytes()


@pytest.mark.slow
@pytest.mark.xdist_group(name="disk_full")  # one worker: the uninterrupted run is made once
@pytest.mark.parametrize("free_kib", [1, 9, 30, 120, 300])
def test_a_full_disk_is_one_line_and_a_resume_with_room_again_ends_like_the_uninterrupted_run(
        tmp_path, small_disk, uninterrupted, free_kib):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    filler = small_disk / "filler"
    with contextlib.suppress(OSError):
        filler.write_bytes(b"\0" * ((SIZE_KIB - free_kib) * 1024))
    run = small_disk / "run"
    full = simulate(str(path), "--out", str(run))
    lines = full.stderr.strip().splitlines()
    assert full.returncode == 2 and len(lines) == 1 and "Traceback" not in full.stderr, full.stderr
    assert lines[0].startswith("error: ") and str(run) in lines[0], lines[0]
    assert "no space left on device" in lines[0].lower(), lines[0]  # the OS's reason, not torch's internal text
    assert not [p.name for p in run.rglob("*.tmp")], "a half-written file was left"
    if not (run / "checkpoint.pt").is_file():
        return  # full before the first checkpoint: nothing to resume
    filler.unlink()
    resumed = simulate("--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    assert (run / "metrics.jsonl").read_bytes() == uninterrupted


def test_torch_s_own_text_never_stands_for_a_full_disk(small_disk):
    """``torch.save`` into a file on a full disk raises a ``RuntimeError`` of its own ("unexpected pos
    ...", the ``ENOSPC`` only its context): the line a user reads names the file and says no space is
    left, for a file written under ``writing`` (``model.pt``) and for the checkpoint."""
    import torch

    from fedgc.bounded import writing
    from fedgc.core.checkpoint import CheckpointWriteError, write_file

    tensor = torch.zeros(SIZE_KIB * 1024 // 4 * 2)  # twice the disk
    path = small_disk / "model.pt"
    with pytest.raises(OSError) as caught, writing(path), open(path, "wb") as f:
        torch.save({"w": tensor}, f)
    assert str(caught.value) == f"[Errno 28] No space left on device: '{path}'"
    path.unlink()
    with pytest.raises(CheckpointWriteError) as caught:
        write_file(small_disk / "checkpoint.pt", {"format": 4, "w": tensor})
    assert str(caught.value) == (f"{small_disk / 'checkpoint.pt'}: cannot write the checkpoint (No space left on "
                                 "device); the previous checkpoint, if any, is kept")
