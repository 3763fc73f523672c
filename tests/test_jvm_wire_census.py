"""Wire format v3 with the JVM node on a real ``flower-superlink``, beside fedgc's Python SuperNodes
(partitions 0 and 1; the JVM node, built on protoc's lite output, holds partition 2):

- The JVM client declares ``wire-versions: [1, 3]`` at the census, as the Python client does, so an
  int8 run (DGC uploads in int8, top-k compressed downloads in int8, or in int4) goes through: every
  round applies the JVM node's update, which it wrote as a version-3 blob of int8 values (in the
  compact form, a ConfigRecord ``{blob: bytes}``), and after its first download (a reset: it announces
  ``no-replica``) it decodes the v3 downloads, which the server sends in the compact form, and
  digest-checks them (a mismatch would fail its round).
- A node that speaks only version 1 is never sent v3: the same JVM client started with
  ``--node-config "... wire-versions=1"`` declares nothing, as a client before v3 did; the int8 run
  then stops at the census with one line naming that node, before any train message goes out.
"""

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


def deploy(tmp_path, flower_app, scenario: dict, *jvm_args: str):
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
        processes.append(jvm_node(port, data_dir, logs / "jvm.log", env, "--insecure", *jvm_args, jar_path=LITE_JAR))
        config, out = run_config(scenario, tmp_path)
        log = tmp_path / "flwr-run.log"
        result = flwr_run(flower_app, "wire-census", config, env, log, timeout_s=300)
    finally:
        for process in reversed(processes):
            process.stop()
    return result, out, log, (logs / "jvm.log").read_text(errors="replace")


def int8_scenario(flower_app, rounds: int, downlink: dict) -> dict:
    shipped = yaml.safe_load((flower_app / "scenarios" / "jvm_phones.yaml").read_text())
    return {**shipped, "rounds": rounds, "downlink": downlink,
            "compression": {**shipped["compression"], "value_dtype": "int8"}}


def test_a_v3_run_stops_at_the_census_when_the_jvm_node_speaks_version_1_only(tmp_path, flower_app, jar):  # noqa: F811
    scenario = int8_scenario(flower_app, 1, {"name": "none"})
    _, out, log, jvm_log = deploy(tmp_path, flower_app, scenario, "--node-config", "wire-versions=1")
    run_log = log.read_text(errors="replace")
    line = (f"node {JVM_LABEL} (partition {JVM_PARTITION}) speaks wire format version 1 only, and "
            "compression.value_dtype: int8 needs version 3")
    assert line in run_log, run_log[-4000:]
    assert not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text().strip()
    assert "fedgc: round" not in jvm_log, jvm_log[-2000:]  # no train message reached it


@pytest.mark.parametrize("downlink_dtype", ["int8", "int4"])
def test_an_int8_run_applies_the_jvm_nodes_v3_updates_and_its_v3_downloads_decode(tmp_path, flower_app, jar,  # noqa: F811
                                                                                   downlink_dtype):
    scenario = int8_scenario(flower_app, 3, {"name": "topk", "density": 0.1, "value_dtype": downlink_dtype})
    result, out, log, jvm_log = deploy(tmp_path, flower_app, scenario)
    assert result.returncode == 0, log.read_text(errors="replace")[-4000:]
    summary, rows = results(out, log)
    assert [r["round"] for r in rows] == [1, 2, 3], jvm_log[-4000:]
    why = [(r["round"], r["applied_nodes"], r["rejected_reasons"], r["accuracy"]) for r in rows]
    assert summary["updates_rejected"] == 0 and summary["clients_failed"] == 0, (why, jvm_log[-3000:])
    for row in rows:
        assert JVM_LABEL in row["applied_nodes"], (row, jvm_log[-4000:])
        assert row["rejected"] == row["failed"] == 0 and row["applied"] == 3
    # Its uploads: version-3 blobs of int8 values, every round.
    for r in (1, 2, 3):
        assert f"fedgc: round {r}: 5 steps on " in jvm_log, jvm_log[-4000:]
    assert jvm_log.count("blob of version 3 (int8 values)") == 3, jvm_log[-4000:]
    # Its downloads: a reset first, then compressed v3 differences it decoded and digest-checked.
    assert rows[0]["downlink_resets"] == 1 and all(r["downlink_resets"] == 0 for r in rows[1:])
    assert all(0 < r["downlink_density"] < 0.3 for r in rows[1:])
    assert "ERROR" not in jvm_log, jvm_log[-4000:]
    assert rows[-1]["accuracy"] > rows[0]["accuracy"], [r["accuracy"] for r in rows]
