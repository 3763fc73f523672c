"""fedgc on Flower's deployment runtime, for real: an insecure ``flower-superlink`` and two
``flower-supernode``s on 127.0.0.1 (free ports, a private FLWR_HOME), the repository submitted as the
Flower app with ``flwr run``, two rounds of DGC on digits. The server must receive and aggregate
sparse updates, with traffic measured from the messages actually exchanged (no simulated network).
Every process is started here and stopped in a ``finally``, with its whole process group.
"""

from __future__ import annotations

import json

import pytest
import tomli_w
import yaml

from fedgc.flower.runtime_processes import (
    flower_env,
    flwr_run,
    free_port,
    start_superlink,
    start_supernode,
    write_connection,
)

from .conftest import REPO

CONNECTION = "fedgc-local-deployment"
SCENARIO = {
    "name": "deployment",
    "seed": 3,
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 2, "partition": "iid"},
    "model": {"name": "mlp"},
    "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
    "compression": {"name": "dgc", "density": 0.05, "momentum": 0.9, "warmup_rounds": 0},
    "strategy": {"fraction": 1.0},
    "eval": {"target_accuracy": 0.5},
}


@pytest.fixture
def deployment(tmp_path):
    """A SuperLink and two SuperNodes (partitions 0 and 1); yields (env, connection name)."""
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    write_connection(home, CONNECTION, f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes = []
    try:
        processes.append(start_superlink(port, logs, env, simulation=False))
        processes += [start_supernode(port, partition, 2, logs, env) for partition in (0, 1)]
        yield env, logs
    finally:
        for process in reversed(processes):
            process.stop()


def test_two_supernodes_send_sparse_updates_the_server_aggregates(tmp_path, deployment):
    env, logs = deployment
    out = tmp_path / "out"
    run_config = tmp_path / "run-config.toml"
    run_config.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(SCENARIO), "out-dir": str(out),
                                         "quiet": True, "node-wait-s": 60.0}))
    pyproject = (REPO / "pyproject.toml").read_bytes()
    result = flwr_run(REPO, CONNECTION, run_config, env, logs / "flwr-run.log", timeout_s=240)
    assert (REPO / "pyproject.toml").read_bytes() == pyproject, "flwr run rewrote pyproject.toml"
    run_log = (logs / "flwr-run.log").read_text(errors="replace")
    assert result.returncode == 0, run_log
    assert (out / "summary.json").exists(), run_log

    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert summary["rounds"] == 2 and [r["round"] for r in rows] == [1, 2]
    assert summary["updates_applied"] == 4 and summary["updates_rejected"] == 0
    for row in rows:
        assert row["selected"] == row["completed"] == row["applied"] == 2
        assert 0 < row["achieved_density"] < 0.2  # DGC at 5 %: sparse updates arrived and were applied
        assert 0 < row["bytes_up"] < row["dense_bytes_up"] / 2
        assert row["bytes_down"] > row["bytes_up"]
        # Measured, not simulated: wall-clock seconds since the run started.
        assert 0 < row["round_duration_s"] < 120 and row["sim_end_s"] >= row["sim_start_s"] >= 0
    assert summary["bytes_up"] == sum(r["bytes_up"] for r in rows)
    assert summary["compression_ratio_up"] > 2
    assert 0.0 <= summary["final_accuracy"] <= 1.0
