"""bench/round_cost.py runs every workload on a tiny setting and prints the figures docs/performance.md
reads: its output's shape, not its speed (the speed is the bench's, on a quiet machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import get_shared

REPO = Path(__file__).resolve().parents[1]
KEYS = {"round_s", "bare_s", "round_over_bare", "overhead_ms_per_client", "startup_s", "first_round_s", "clients_per_round",
        "execution", "split_s"}


@pytest.mark.slow
def test_round_cost_prints_one_entry_per_workload(mnist_root, shared_dir, tmp_path):
    if not (shared_dir / "data" / "leaf-shakespeare").is_dir():
        pytest.skip(get_shared(shared_dir / "data" / "leaf-shakespeare", "shakespeare"))
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nText before.\n<!-- round_cost:tiny:begin -->\nold\n<!-- round_cost:tiny:end -->\n"
                   "Text after.\n")
    proc = subprocess.run([sys.executable, "bench/round_cost.py", "--tiny", "--rounds", "1", "--write", "tiny",
                           "--doc", str(doc)], cwd=REPO,
                          env={**os.environ, "FEDGC_SHARED_DIR": str(shared_dir), "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) == {"xdev_step", "xdev_epoch", "wide_1000", "lstm_dp", "lstm_dp_warmup", "quickstart",
                           "machine"}
    for name in ("xdev_step", "xdev_epoch", "wide_1000", "lstm_dp", "lstm_dp_warmup", "quickstart"):
        figures = result[name]
        assert KEYS <= set(figures), name
        assert figures["round_s"] > 0 and figures["bare_s"] > 0
        assert figures["round_over_bare"] == pytest.approx(figures["round_s"] / figures["bare_s"], rel=0.02, abs=0.01)
        # round_s and bare_s are printed to 0.1 ms: recomputed from them, the per-client figure is off by up
        # to 0.1 ms / clients (plus its own rounding to 0.01 ms)
        assert figures["overhead_ms_per_client"] == pytest.approx(
            1000 * (figures["round_s"] - figures["bare_s"]) / figures["clients_per_round"],
            abs=0.1 / figures["clients_per_round"] + 0.01)
        assert figures["split_s"]["training"] > 0
    assert result["xdev_step"]["clients_per_round"] == 4 and result["wide_1000"]["clients_per_round"] == 40
    assert result["lstm_dp"]["clients_per_round"] == 4  # the data-parallel round: all four clients
    # lstm_dp times the rounds a long run is made of, at DGC's density; lstm_dp_warmup the denser warm-up ones
    assert result["lstm_dp"]["density"] == [0.001, 0.001]
    assert min(result["lstm_dp_warmup"]["density"]) > 0.001
    assert result["machine"]["cpu_capability"]
    text = doc.read_text()
    assert text.startswith("# Performance\n\nText before.\n") and text.endswith("Text after.\n") and "\nold\n" not in text
    table = text.split("<!-- round_cost:tiny:begin -->")[1].split("<!-- round_cost:tiny:end -->")[0]
    assert f"CPU kernel set {result['machine']['cpu_capability']}" in table
    assert all(f"| {name} | " in table
               for name in ("xdev_step", "xdev_epoch", "wide_1000", "lstm_dp", "lstm_dp_warmup", "quickstart"))


def test_round_cost_runs_the_disk_store_in_the_round_thread_when_asked(mnist_root, shared_dir):
    """``--store-thread off``: the same workload with the disk store called in the round's own thread (no
    read ahead, no write behind), said in the machine entry, so its figures can be read beside the
    default's; a run of it reads and writes every client's state as the threaded one does."""
    import torch

    import fedgc.flower.runtime.inline_grid as inline_grid

    sys.path.insert(0, str(REPO / "bench"))
    import round_cost

    saved, threads = inline_grid.ThreadedStore, torch.get_num_threads()
    try:
        result = round_cost.main(["--tiny", "--rounds", "1", "--workloads", "xdev_step", "--store-thread", "off"])
        assert inline_grid.ThreadedStore is round_cost.SynchronousStore
    finally:
        inline_grid.ThreadedStore = saved
        torch.set_num_threads(threads)
        sys.path.remove(str(REPO / "bench"))
    assert result["machine"]["store_thread"] == "off"
    assert result["xdev_step"]["clients_per_round"] == 4 and result["xdev_step"]["split_s"]["state I/O"] > 0


@pytest.mark.parametrize("argv, reason", [(["--workloads", "xdev_stpe"], "unknown workload"),
                                          (["--rounds", "0"], "--rounds must be"), (["--rounds", "-3"], "--rounds must be"),
                                          (["--threads", "0"], "--threads"), (["--device", "tpu"], "--device"),
                                          (["--write", "../x y"], "--write"),
                                          (["--store-thread", "maybe"], "--store-thread")])
def test_round_cost_refuses_bad_arguments_in_one_line(argv, reason):
    proc = subprocess.run([sys.executable, "bench/round_cost.py", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and reason in proc.stderr and "Traceback" not in proc.stderr
