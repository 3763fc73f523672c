"""A user's model and compressor from a module outside fedgc, named by import path, on every engine:
inline (tests/test_extensions.py), Flower's simulation runtime (the same metrics as inline), and a real
deployment, where each SuperNode imports the module only because its operator listed it
(``--node-config plugins=...``; the module reaches the node on its PYTHONPATH or installed): a node
that did not list it refuses the round (the compressor, the first name it checks, is unknown to it),
counted as a failed client."""

from __future__ import annotations

import json
import os

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
from fedgc.scenario.model import validate

from .test_extensions import MODULE
from .test_flower_engine import _rows, differences

pytestmark = pytest.mark.usefixtures("isolated_registries")

CONNECTION = "fedgc-plugins-deployment"


@pytest.fixture
def plugin_scenario(tmp_path, monkeypatch):
    name = f"user_plugins_{tmp_path.name.replace('-', '_')}"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    scenario = {"name": "plugins", "seed": 2, "rounds": 2,
                "data": {"dataset": "digits", "num_clients": 2, "partition": "iid"},
                "model": {"name": f"{name}:TinyNet", "options": {"hidden": 10}},
                "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
                "compression": {"name": f"{name}:HalfTopK"},
                "strategy": {"fraction": 1.0}, "checkpoint_every": 0}
    return name, tmp_path / "pkg", scenario


@pytest.mark.ray
def test_a_user_model_and_compressor_on_flowers_simulation_runtime(tmp_path, plugin_scenario):
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    from fedgc.runs.engines import run_flower, run_inline

    _, _, tree = plugin_scenario
    scenario = validate(tree)
    run_inline(scenario, tmp_path / "inline", quiet=True)
    summary = run_flower(scenario, tmp_path / "flower", quiet=True)
    assert summary.updates_applied == 4 and summary.clients_failed == 0
    assert differences(_rows(tmp_path / "inline"), _rows(tmp_path / "flower")) == []


@pytest.mark.deployment
def test_a_user_model_and_compressor_on_a_real_deployment(tmp_path, flower_app, plugin_scenario):
    """Node 1 lists the module and trains; node 2 does not, and refuses every round."""
    module, folder, tree = plugin_scenario
    home = tmp_path / "flwr-home"
    env = {**flower_env(home), "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
    port = free_port()
    write_connection(home, CONNECTION, f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes = []
    out = tmp_path / "out"
    try:
        processes.append(start_superlink(port, logs, env, simulation=False))
        processes.append(start_supernode(port, 0, 2, logs, env, plugins=module))
        processes.append(start_supernode(port, 1, 2, logs, env))
        run_config = tmp_path / "run-config.toml"
        run_config.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(tree), "out-dir": str(out),
                                             "quiet": True, "node-wait-s": 60.0}))
        result = flwr_run(flower_app, CONNECTION, run_config, env, tmp_path / "flwr-run.log", timeout_s=240)
    finally:
        for process in reversed(processes):
            process.stop()
    log = (tmp_path / "flwr-run.log").read_text(errors="replace")
    assert result.returncode == 0, log
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["applied_nodes"], r["failed"]) for r in rows] == [([1], 1), ([1], 1)]
    clients = [json.loads(line) for line in (out / "clients.jsonl").read_text().splitlines()]
    refused = [c["reason"] for c in clients if c["node"] == 2]
    assert len(refused) == 2 and all("unknown compressor" in reason and module in reason for reason in refused), refused
    assert 1.2 < rows[-1]["dense_bytes_up"] / rows[-1]["bytes_up"] < 2.0  # HalfTopK's half, on the wire
