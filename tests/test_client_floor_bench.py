"""bench/client_floor.py on a tiny round: its output's shape and its table, not its speed (the speed is
the bench's, read side by side on a quiet machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import client_floor  # noqa: E402


def test_the_batched_arithmetic_is_the_one_by_one_arithmetic():
    """Batched or one client a call, numpy or torch: the same momentum correction, bit for bit, wherever
    no way sent the entry (their sampled thresholds differ with the order of the draws); every bias sent
    whole, and about the density's share of every weight tensor."""
    states = [client_floor.Round(3) for _ in range(4)]
    for state, (way, batched) in zip(states, [("numpy", False), ("numpy", True), ("torch", False), ("torch", True)]):
        client_floor.time_dgc(state, way, batched)
    u0, v0 = states[0].u, states[0].v
    for state in states[1:]:
        # Every way computes u = m·u + Δ and v = v + u, then zeroes the sent entries: away from the sent
        # entries (a few per cent), the states agree bit for bit.
        kept = (state.v != 0) & (v0 != 0)
        assert kept.mean() > 0.9
        assert np.array_equal(state.v[kept], v0[kept]) and np.array_equal(state.u[kept & (state.u != 0) & (u0 != 0)],
                                                                           u0[kept & (state.u != 0) & (u0 != 0)])
    for name, shape, lo, hi in states[0].layout:
        sent = (states[0].v[:, lo:hi] == 0).mean()
        assert sent == 1.0 if len(shape) <= 1 else 0.001 < sent < 0.05, name


def test_client_floor_prints_its_figures_and_writes_its_table(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nBefore.\n<!-- client_floor:begin -->\nold\n<!-- client_floor:end -->\nAfter.\n")
    proc = subprocess.run([sys.executable, "bench/client_floor.py", "--clients", "4", "--reps", "1", "--write",
                           "--doc", str(doc)], cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    ms = result["per_client_ms"]
    assert set(ms) == {"dgc_numpy_one_by_one", "dgc_numpy_batched", "dgc_torch_one_by_one", "dgc_torch_batched",
                       "fedgc_compress", "fedgc_state", "state_copies", "training_warm", "training_cold"}
    assert all(value > 0 for value in ms.values())
    for way in ("numpy", "torch"):
        assert result["batched_over_one_by_one"][way] == pytest.approx(
            ms[f"dgc_{way}_batched"] / ms[f"dgc_{way}_one_by_one"], abs=0.01)
    assert result["fedgc_compress_over_floor"] == pytest.approx(ms["fedgc_compress"] / ms["dgc_numpy_one_by_one"], abs=0.01)
    assert result["fedgc_state_over_copies"] == pytest.approx(ms["fedgc_state"] / ms["state_copies"], abs=0.01)
    assert result["parameters"] == 199_210 and result["clients"] == 4
    assert result["machine"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    text = doc.read_text()
    assert text.startswith("# Performance\n\nBefore.\n") and text.endswith("After.\n") and "\nold\n" not in text
    assert f"CPU kernel set {result['machine']['cpu_capability']}" in text and "| DGC's arithmetic, numpy |" in text


def test_client_floor_refuses_settings_out_of_bounds():
    for argv in (["--clients", "0"], ["--reps", "1000"], ["--scrub-mb", "0"]):
        with pytest.raises(SystemExit):
            client_floor.main(argv)
