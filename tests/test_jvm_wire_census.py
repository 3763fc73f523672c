"""A node that speaks only wire format version 1 is never sent v3: a deployment on a real
``flower-superlink`` with the JVM SuperNode (which declares no ``wire-versions`` at the census) and
fedgc's Python SuperNodes, on a scenario whose uploads are int8 values (v3), stops at the census with
one line naming the JVM node, before any train message goes out; the same deployment with fp32
values runs (the JVM node's updates applied)."""

from __future__ import annotations

import pytest
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

from .test_jvm_client import jar  # noqa: F401  (the fixture: make jvm, or skip)
from .test_jvm_e2e import JVM_LABEL, JVM_PARTITION, LITE_JAR, export_partition, jvm_node, results, run_config

pytestmark = pytest.mark.deployment


def deploy(tmp_path, flower_app, value_dtype: str):
    shipped = yaml.safe_load((flower_app / "scenarios" / "jvm_phones.yaml").read_text())
    scenario = {**shipped, "rounds": 1, "downlink": {"name": "none"},
                "compression": {**shipped["compression"], "value_dtype": value_dtype}}
    data_dir = export_partition(scenario, tmp_path)
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    write_connection(home, "wire-census", f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes: list[ManagedProcess] = []
    try:
        processes.append(start_superlink(port, logs, env, simulation=False))
        processes += [start_supernode(port, p, 3, logs, env) for p in (0, 1)]
        processes.append(jvm_node(port, data_dir, logs / "jvm.log", env, "--insecure", jar_path=LITE_JAR))
        config, out = run_config(scenario, tmp_path)
        log = tmp_path / "flwr-run.log"
        flwr_run(flower_app, "wire-census", config, env, log, timeout_s=240)
    finally:
        for process in reversed(processes):
            process.stop()
    return out, log, (logs / "jvm.log").read_text(errors="replace")


def test_a_v3_run_stops_at_the_census_when_the_jvm_node_speaks_version_1_only(tmp_path, flower_app, jar):  # noqa: F811
    out, log, jvm_log = deploy(tmp_path, flower_app, "int8")
    run_log = log.read_text(errors="replace")
    line = (f"node {JVM_LABEL} (partition {JVM_PARTITION}) speaks wire format version 1 only, and "
            "compression.value_dtype: int8 needs version 3")
    assert line in run_log, run_log[-4000:]
    assert not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text().strip()
    assert "fedgc: round" not in jvm_log, jvm_log[-2000:]  # no train message reached it


def test_the_same_deployment_with_fp32_values_runs_with_the_jvm_node(tmp_path, flower_app, jar):  # noqa: F811
    out, log, jvm_log = deploy(tmp_path, flower_app, "fp32")
    summary, rows = results(out, log)
    assert summary["updates_rejected"] == 0 and summary["clients_failed"] == 0, (summary, jvm_log[-2000:])
    assert JVM_LABEL in rows[0]["applied_nodes"], (rows, jvm_log[-2000:])
