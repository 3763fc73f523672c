"""A hostile node beside honest ones on a real ``flower-superlink``: the census and late admission of
fedgc's ServerApp keep it out, count it, and the run goes on.

Before (issue 28): a SuperNode answering the partition query with a ``partition-id`` of NaN, ±inf or
a list raised ``ValueError``/``OverflowError``/``TypeError`` in the server's census; with two honest
nodes and one such node the ServerApp died before round 1 (and ``flwr run`` exited 0); a late joiner
doing the same killed a run midway. Here the hostile node is the JVM SuperNode with a test handler
(``fedgc.cli.check.HostilePartitionHandler``) that answers the query with NaN, started before the honest
Python SuperNodes; a second one, answering a list, connects once the census is done. The run must
finish every round with the two honest nodes, every update applied, exit 0.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
import tomli_w
import yaml

from fedgc.flower.runtime.runtime_processes import (
    ManagedProcess,
    flower_env,
    flwr_run,
    free_port,
    start_superlink,
    start_supernode,
    write_connection,
)

from .test_jvm_client import JAR, TESTS_JAR, jar  # noqa: F401  (the fixture: make jvm, or skip)

pytestmark = pytest.mark.deployment

SCENARIO = {
    "name": "census-hostile",
    "seed": 3,
    "rounds": 4,
    "data": {"dataset": "digits", "num_clients": 2, "partition": "iid"},
    "model": {"name": "mlp"},
    "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
    "compression": {"name": "dgc", "density": 0.05, "momentum": 0.9, "warmup_rounds": 0},
    "strategy": {"fraction": 1.0},
    "eval": {"target_accuracy": 0.5},
}


def hostile_node(port: int, value: str, log, env: dict, data_dir) -> ManagedProcess:
    command = ["java", "-cp", f"{JAR}{os.pathsep}{TESTS_JAR}", "fedgc.client.Main", "--superlink", f"127.0.0.1:{port}",
               "--insecure", "--node-config", "partition-id=2 num-partitions=3", "--data-dir", str(data_dir),
               "--poll-interval", "0.2", "--handler", "fedgc.cli.check.HostilePartitionHandler"]
    return ManagedProcess(command, log, {**env, "FEDGC_HOSTILE_PARTITION": value})


def wait_for_text(path, text: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.2)
    return False


def test_a_hostile_node_beside_honest_ones_does_not_stop_the_serverapp(tmp_path, flower_app, jar):  # noqa: F811
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    write_connection(home, "census-hostile", f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    data_dir = tmp_path / "jvm-data"  # the hostile nodes never train: no train.npz
    data_dir.mkdir()
    out = tmp_path / "out"
    run_config = tmp_path / "run-config.toml"
    run_config.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(SCENARIO), "out-dir": str(out),
                                         "quiet": True, "node-wait-s": 60.0}))
    log = tmp_path / "flwr-run.log"
    processes: list[ManagedProcess] = []
    try:
        processes.append(start_superlink(port, logs, env, simulation=False))
        processes.append(hostile_node(port, "nan", logs / "hostile-nan.log", env, data_dir))
        assert wait_for_text(logs / "hostile-nan.log", "SuperNode ID", 90), processes[-1].log_tail()
        processes += [start_supernode(port, p, 2, logs, env) for p in (0, 1)]

        def start_late_once_the_census_is_done():  # it joins during round 1: asked, then refused, between rounds
            if wait_for_text(log, "it is left out", 200):
                processes.append(hostile_node(port, "list", logs / "hostile-list.log", env, data_dir))

        late = threading.Thread(target=start_late_once_the_census_is_done, daemon=True)
        late.start()
        result = flwr_run(flower_app, "census-hostile", run_config, env, log, timeout_s=300)
        late.join(timeout=5)
    finally:
        for process in reversed(processes):
            process.stop()
    run_log = log.read_text(errors="replace")
    assert result.returncode == 0, run_log[-4000:]
    assert "hostile: answered the partition query with nan" in (logs / "hostile-nan.log").read_text(errors="replace")
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert summary["rounds"] == 4 and summary["stopped_reason"] == "completed", summary
    assert summary["clients_failed"] == 0 and summary["updates_rejected"] == 0, summary
    assert all(r["applied_nodes"] == [1, 2] for r in rows), [r["applied_nodes"] for r in rows]
    late_log = logs / "hostile-list.log"
    assert "hostile: answered the partition query with list" in late_log.read_text(errors="replace")
    # The ServerApp's log (streamed by flwr run): each hostile answer left out, with its reason.
    assert "partition-id not an integer in range (nan); it is left out" in run_log, run_log[-4000:]
    assert "partition-id not an integer in range ([1, 2]); it is left out" in run_log, run_log[-4000:]
    assert run_log.count("it is left out") == 2, run_log[-4000:]  # each counted once (not pulled again)
