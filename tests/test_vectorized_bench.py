"""bench/gpu.py runs end to end on the CPU at --quick sizes and prints its JSON figures last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "gpu.py"


@pytest.mark.slow
def test_gpu_bench_quick_on_the_cpu():
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--device", "cpu", "--workloads", "cnn10,2nn100"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["device"] == "cpu" and figures["targets_met"] is None
    for name in ("cnn10", "2nn100"):
        work = figures[name]
        for way in ("bare_loop", "bare_vmap", "fedgc_sequential", "fedgc_vectorized"):
            assert work[f"{way}_s"] > 0
    # The two executors agree on the bench's data: the 2NN to rounding; the CNN's training at lr 0.05
    # amplifies rounding over its steps (bench/gpu.py, client_data), and oneDNN's AVX2 kernels (fedgc's
    # portable default) round its batched convolutions otherwise than its per-client ones: 1.4e-4 here,
    # 3e-8 with FEDGC_CPU_KERNELS=native on an AVX-512 CPU. tests/test_vectorized.py holds every model to 1e-5.
    assert figures["2nn100"]["max_abs_delta_diff_seq_vs_vec"] < 1e-5
    assert figures["cnn10"]["max_abs_delta_diff_seq_vs_vec"] < 1e-3
    assert figures["2nn100"]["fedgc_cpu_sequential_s"] == figures["2nn100"]["fedgc_sequential_s"]
    assert figures["notices"] == []


def test_gpu_bench_cuda_without_a_gpu_is_a_one_line_error():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--device", "cuda"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "CUDA is not available" in done.stderr
