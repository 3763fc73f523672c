"""fedgc on Flower's deployment runtime, for real: an insecure ``flower-superlink`` and two
``flower-supernode``s on 127.0.0.1 (free ports, a private FLWR_HOME), the repository submitted as the
Flower app with ``flwr run``, two rounds of DGC on digits. The server must receive and aggregate
sparse updates, with traffic measured from the messages actually exchanged (no simulated network).
Every process is started here and stopped in a ``finally``, with its whole process group.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time

import pytest
import tomli_w
import yaml

from fedgc.flower.runtime.runtime_processes import (
    flower_env,
    flwr_run,
    free_port,
    start_superlink,
    start_supernode,
    write_connection,
)

from .conftest import REPO

pytestmark = pytest.mark.deployment

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


@contextlib.contextmanager
def local_deployment(tmp_path, data_dirs=(None, None), late: list | None = None):
    """A SuperLink and one SuperNode per entry of ``data_dirs`` (partition i; with a folder, it
    trains on that device data), all stopped on exit; yields (env, logs folder). ``late``, when given,
    receives a function that starts the SuperNode of a further partition (stopped on exit too)."""
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    write_connection(home, CONNECTION, f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes = []
    try:
        processes.append(start_superlink(port, logs, env, simulation=False))
        processes += [start_supernode(port, partition, len(data_dirs), logs, env, data_dir=data_dir)
                      for partition, data_dir in enumerate(data_dirs)]
        if late is not None:
            late.append(lambda partition: processes.append(start_supernode(port, partition, partition + 1, logs, env)))
        yield env, logs
    finally:
        for process in reversed(processes):
            process.stop()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """Two SuperNodes (partitions 0 and 1) on the scenario's data, shared by this module's runs."""
    with local_deployment(tmp_path_factory.mktemp("deployment")) as running:
        yield running


def submit(scenario: dict, tmp_path, deployment, app, node_wait_s: float = 60.0) -> tuple[dict, list[dict]]:
    """``flwr run`` ``app`` (the repository, or the ``flower_app`` fixture's copy of its app) on the
    deployment; (summary, metrics rows)."""
    env, _ = deployment
    out = tmp_path / "out"
    run_config = tmp_path / "run-config.toml"
    run_config.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(scenario), "out-dir": str(out),
                                         "quiet": True, "node-wait-s": node_wait_s}))
    pyproject = (app / "pyproject.toml").read_bytes()
    log = tmp_path / "flwr-run.log"
    result = flwr_run(app, CONNECTION, run_config, env, log, timeout_s=240)
    assert (app / "pyproject.toml").read_bytes() == pyproject, "flwr run rewrote pyproject.toml"
    run_log = log.read_text(errors="replace")
    assert result.returncode == 0, run_log
    assert (out / "summary.json").exists(), run_log
    summary = json.loads((out / "summary.json").read_text())
    return summary, [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_two_supernodes_send_sparse_updates_the_server_aggregates(tmp_path, deployment):
    summary, rows = submit(SCENARIO, tmp_path, deployment, REPO)  # the repository itself, as docs/deploy-edge.md submits it
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


def test_supernodes_rebuild_the_model_from_compressed_downloads(tmp_path, deployment, flower_app):
    """The downlink mod runs in each real SuperNode: downloads are compressed differences, every client
    stays in sync (no failure, no reset) and the run learns as the dense-download run does."""
    scenario = {**SCENARIO, "rounds": 3, "downlink": {"name": "topk", "density": 0.05}}
    summary, rows = submit(scenario, tmp_path, deployment, flower_app)
    from fedgc.models import build_model

    model = build_model("mlp", (1, 8, 8), 10, 0)  # digits: 8×8 images, 10 classes
    dense_model_bytes = 4 * sum(p.numel() for p in model.parameters())
    assert summary["clients_failed"] == 0 and summary["updates_applied"] == 6
    for row in rows:
        assert row["downlink_resets"] == 0 and 0 < row["downlink_density"] < 0.2
        assert row["bytes_down"] < 0.25 * 2 * dense_model_bytes  # two downloads, each a fraction of the model


def test_a_supernode_that_connects_during_the_run_joins_it(tmp_path, flower_app):
    """A phone need not be online when the run starts: the census finds partition 0 alone and the run
    goes on with it; the SuperNode of partition 1, started once round 1 is recorded, is asked for its
    partition between rounds, admitted without holding up a round, and trains from then on."""
    late: list = []
    scenario = {**SCENARIO, "rounds": 5}
    with local_deployment(tmp_path, data_dirs=(None,), late=late) as running:
        metrics = tmp_path / "out" / "metrics.jsonl"

        def start_when_round_1_is_in():
            deadline = time.monotonic() + 200
            while time.monotonic() < deadline and not (metrics.exists() and metrics.read_text().strip()):
                time.sleep(0.2)
            late[0](1)

        starter = threading.Thread(target=start_when_round_1_is_in, daemon=True)
        starter.start()
        summary, rows = submit(scenario, tmp_path, running, flower_app, node_wait_s=25.0)
        starter.join(timeout=5)
    assert rows[0]["applied_nodes"] == [1]  # the census found partition 0 only
    joined = [r["round"] for r in rows if r["applied_nodes"] == [1, 2]]
    assert joined and joined[-1] == 5, [r["applied_nodes"] for r in rows]  # node 2 trains once it is in
    assert summary["clients_failed"] == 0 and summary["updates_rejected"] == 0


def test_a_failed_serverapp_makes_the_launcher_exit_non_zero_saying_so(tmp_path, deployment, flower_app):
    """Flower's ``flwr run`` exits 0 when the ServerApp raised (here: a run config whose scenario is
    not YAML); fedgc's launcher asks the SuperLink how the run ended and says so."""
    env, _ = deployment
    run_config = tmp_path / "run-config.toml"
    run_config.write_text(tomli_w.dumps({"scenario-yaml": "rounds: [", "out-dir": str(tmp_path / "out"),
                                         "quiet": True, "node-wait-s": 5.0}))
    log = tmp_path / "flwr-run.log"
    result = flwr_run(flower_app, CONNECTION, run_config, env, log, timeout_s=240)
    last = log.read_text(errors="replace").strip().splitlines()[-1]
    assert result.returncode == 1 and last.startswith("fedgc: run ") and last.endswith(" ended finished:failed"), last
    # The same through the command the docs use: `fedgc submit`.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "fedgc.cli", "submit", str(flower_app), CONNECTION, "--run-config",
                           str(run_config), "--log", str(tmp_path / "submit.log")], env={**env, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 1 and done.stderr.startswith("error: the run failed (fedgc: run "), done.stderr
    assert "ended finished:failed" in done.stderr
