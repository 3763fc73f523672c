"""``engine: flower`` on an existing Ray cluster: a head and a worker node with their own CPU counts.

The scenario names the cluster (``ray.address``) and what a client process reserves
(``ray.client_cpus``); Flower's simulation process joins the cluster instead of starting a Ray of its
own, its client processes are placed on both nodes, and the run's metrics are the single-machine
run's: the inline engine's, within the tolerances of ``test_flower_engine.differences`` (message ids and
wall-clock time), the tolerances by which Flower's runtime on its own Ray matches it there.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from .conftest import REPO
from .test_flower_engine import _rows, differences

HEAD_CPUS, WORKER_CPUS = 1, 2  # a client process reserves one CPU: 3 client processes, on both nodes


def _run(scenario: dict, folder, tmp_path) -> None:
    path = tmp_path / f"{folder.name}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = subprocess.run([sys.executable, "-m", "fedgc", "run", str(path), "--out", str(folder), "--quiet"],
                            cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.ray
@pytest.mark.slow
def test_a_two_node_ray_cluster_runs_the_clients_on_both_nodes_and_matches_the_single_machine_run(
        tmp_path, tiny_scenario):
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    tiny_scenario.update(rounds=2)
    tiny_scenario["compression"] = {"name": "dgc", "density": 0.05, "momentum": 0.9, "warmup_rounds": 1}
    # The single-machine reference is the inline engine: test_flower_engine holds Flower's runtime on its
    # own Ray to it (within the same `differences`), so a second Ray runtime here would only add minutes.
    _run(tiny_scenario, tmp_path / "single", tmp_path)

    holder = subprocess.Popen([sys.executable, "-m", "tests.ray_cluster", str(HEAD_CPUS), str(WORKER_CPUS)],
                              cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        cluster = json.loads(holder.stdout.readline())
        assert sorted(cluster["nodes"].values()) == [HEAD_CPUS, WORKER_CPUS]
        on_cluster = dict(tiny_scenario, engine="flower", ray={"address": cluster["address"], "client_cpus": 1})
        _run(on_cluster, tmp_path / "cluster", tmp_path)
        holder.stdin.write("ClientAppActor\n")
        holder.stdin.flush()
        ran_on = json.loads(holder.stdout.readline())["actor nodes"]
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)

    assert sorted(ran_on) == sorted(cluster["nodes"]), "client processes on both the head and the worker node"
    single, clustered = _rows(tmp_path / "single"), _rows(tmp_path / "cluster")
    assert [r["round"] for r in clustered] == [1, 2]
    assert all(r["applied"] == 4 and r["failed"] == 0 for r in clustered)
    assert differences(single, clustered) == []
    summaries = [json.loads((tmp_path / f / "summary.json").read_text()) for f in ("single", "cluster")]
    assert summaries[0]["final_accuracy"] == summaries[1]["final_accuracy"]


def test_ray_keys_only_apply_to_the_flower_engine(tiny_scenario):
    from fedgc.scenario.model import ScenarioError, validate

    with pytest.raises((ScenarioError, ValueError), match="ray: only applies to engine: flower"):
        validate(dict(tiny_scenario, ray={"address": "127.0.0.1:6379"}))
    for bad in ("127.0.0.1", "http://x:1", "a b:1", "x:123456"):
        with pytest.raises((ScenarioError, ValueError), match=r"ray.address"):
            validate(dict(tiny_scenario, engine="flower", ray={"address": bad}))
    assert validate(dict(tiny_scenario, engine="flower", ray={"address": "auto", "client_cpus": 3})).ray.client_cpus == 3


def test_without_a_cluster_the_runtime_starts_a_ray_of_its_own_whatever_this_machine_recorded(tiny_scenario):
    """``RAY_ADDRESS=local``: not the inherited variable, nor the cluster ``ray start`` last recorded in
    ``/tmp/ray/ray_current_cluster`` (which ``ray.init()`` would join otherwise, even a dead one)."""
    from fedgc.flower.runtime.flower_engine import set_ray_address
    from fedgc.scenario.model import validate

    env = {"RAY_ADDRESS": "10.1.2.3:6379"}
    set_ray_address(env, validate(dict(tiny_scenario, engine="flower")))
    assert env["RAY_ADDRESS"] == "local"
    set_ray_address(env, validate(dict(tiny_scenario, engine="flower", ray={"address": "10.0.0.5:6379"})))
    assert env["RAY_ADDRESS"] == "10.0.0.5:6379"

