"""A node imports only what its operator listed (node config ``plugins=...``), on every path: a train
message's import paths (tests/test_extensions.py), the run config's scenario (its ``data.dataset`` and
``model.name`` import paths), the initial replica of downlink compression, and the ``fedgc.plugins``
entry points installed on the node. A planted module records its import, and a call of its dataset
function or its entry point, in a marker file: where the operator did not list it, no marker appears,
and the node either trains without it (a device with its own data never reads the run config's
scenario) or refuses the round with ``bad-run-config``, in one line."""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np
import pytest
import tomli_w
import yaml
from flwr.app import Context, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fedgc.flower import keys
from fedgc.flower.client.client_app import app
from fedgc.flower.client_checks import ClientRefusal
from fedgc.flower.runtime.runtime_processes import (
    flower_env,
    flwr_run,
    free_port,
    start_superlink,
    start_supernode,
    write_connection,
)
from fedgc.flower.setup import SCENARIO_YAML
from fedgc.plugins import registry as extensions
from fedgc.plugins.import_paths import node_policy
from tests.flower_messages import instruction
from tests.test_client_message_hostile import DATA, TREE, base_content

pytestmark = pytest.mark.usefixtures("isolated_registries")

MARKERS_ENV = "FEDGC_TEST_MARKERS"

# Writes <module>.imported when imported, <module>.called when its dataset function runs and
# <module>.registered when its entry point runs, into $FEDGC_TEST_MARKERS (or the folder written in).
PLANTED = '''
import os
import pathlib

import numpy as np

_FOLDER = os.environ.get("{env}") or {folder!r}


def _mark(what):
    if _FOLDER:
        pathlib.Path(_FOLDER, __name__ + "." + what).write_text(what)


_mark("imported")


def load():
    """A dataset of the digits' shape (1, 8, 8) and 10 classes: the run config's data.dataset."""
    import fedgc

    _mark("called")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(240, 1, 8, 8)).astype(np.float32)
    y = np.arange(240, dtype=np.int64) % 10
    return fedgc.UserData(x[:200], y[:200], x[200:], y[200:], num_classes=10)


def Net(input_shape, num_classes):
    from torch import nn

    return nn.Sequential(nn.Flatten(), nn.Linear(64, num_classes))


def register():
    """A fedgc.plugins entry point."""
    _mark("registered")
'''


class Planted:
    """Two planted modules on a folder of the path: ``module`` (named by the run config's scenario) and
    ``entry`` (a ``fedgc.plugins`` entry point of an installed distribution, its .dist-info beside)."""

    def __init__(self, root, markers, folder_in_module: str) -> None:
        self.tag = hashlib.sha256(str(root).encode()).hexdigest()[:8]
        self.module, self.entry = f"planted_{self.tag}", f"planted_ep_{self.tag}"
        self.folder, self.markers = root, markers
        root.mkdir()
        markers.mkdir(exist_ok=True)
        for name in (self.module, self.entry):
            (root / f"{name}.py").write_text(PLANTED.format(env=MARKERS_ENV, folder=folder_in_module))
        info = root / f"{self.entry}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {self.entry}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[fedgc.plugins]\nplanted = {self.entry}:register\n")

    def marks(self, folder=None) -> list[str]:
        return sorted(p.name for p in (folder or self.markers).iterdir())

    def tree(self, **changes) -> dict:
        """The hostile test's scenario with its dataset (and ``changes``) named by import path."""
        return {**TREE, "data": {**TREE["data"], "dataset": f"{self.module}:load"}, **changes}


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """The planted modules on this process's path, fedgc's entry points not yet loaded here."""
    planted = Planted(tmp_path / "site", tmp_path / "markers", str(tmp_path / "markers"))
    monkeypatch.syspath_prepend(str(planted.folder))
    monkeypatch.setattr(extensions, "_entry_points_loaded", False)
    monkeypatch.setattr(extensions, "_entry_points_called", set(), raising=False)
    yield planted
    for name in (planted.module, planted.entry):
        sys.modules.pop(name, None)


def reply(ctx: Context) -> str | None:
    """The real ClientApp's answer to a valid train message (digits, mlp): None for an update, the
    refusal's text otherwise."""
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    try:
        answer = app(instruction(base_content(), 1, "train", message_id="m1"), ctx)
    except ClientRefusal as refusal:
        return str(refusal)
    assert keys.UPDATE in answer.content.array_records
    return None


def node(node_config: dict, tree: dict) -> Context:
    return Context(run_id=1, node_id=1, node_config={"partition-id": 0, "num-partitions": 4, **node_config},
                   state=RecordDict(), run_config={SCENARIO_YAML: yaml.safe_dump(tree)})


def test_a_device_with_its_own_data_never_reads_the_run_configs_scenario(tmp_path, planted):
    """The run config names a model and a dataset by import path, and the device neither imports them
    nor asks the scenario where to train: it trains on its train.npz, nothing planted runs."""
    data = tmp_path / "device"
    data.mkdir()
    np.savez(data / "train.npz", x=DATA.partitions[0].x, y=DATA.partitions[0].y)
    tree = planted.tree(model={"name": f"{planted.module}:Net"})
    assert reply(node({"data-dir": str(data)}, tree)) is None
    assert planted.marks() == [] and planted.module not in sys.modules


def test_a_simulation_node_imports_the_run_configs_import_paths_only_when_listed(planted):
    """Unlisted: refused in one line, nothing imported, no dataset function called. Listed: the node
    imports the module and trains on its data; the entry point it did not list still never runs."""
    refusal = reply(node({}, planted.tree()))
    assert refusal == (f"bad-run-config: the run config's scenario: dataset '{planted.module}:load': this node does "
                       f"not import {planted.module} (its operator lists the modules it may import in node config "
                       "plugins=...)")
    assert planted.marks() == [] and planted.module not in sys.modules
    assert reply(node({"plugins": f"other_pkg, {planted.module}"}, planted.tree())) is None
    assert planted.marks() == [f"{planted.module}.called", f"{planted.module}.imported"]


def test_entry_points_load_on_a_node_only_when_listed(planted):
    """An installed ``fedgc.plugins`` entry point is a module like any other: a node loads it only when
    its operator listed its module; the user's own process loads it as before."""
    with node_policy(planted.module):
        assert extensions.load_entry_points() == []
    assert planted.marks() == [] and planted.entry not in sys.modules
    with node_policy(planted.entry):
        assert extensions.load_entry_points() == ["planted"]
    assert planted.marks() == [f"{planted.entry}.imported", f"{planted.entry}.registered"]
    assert extensions.load_entry_points() == []  # once per process


@pytest.mark.deployment
def test_real_supernodes_import_only_what_their_operators_listed(tmp_path, flower_app):
    """Three SuperNodes, each its own marker folder; the ServerApp imports and calls the planted
    dataset (the user's process). Node 1, a device with its own data and no plugins, trains and
    rebuilds compressed downloads from an initial model it builds from the message; node 2, a
    simulation's node with no plugins, refuses every round; node 3 lists the dataset's module (not
    the entry point's) and trains."""
    planted = Planted(tmp_path / "site", tmp_path / "markers", "")
    folders = [tmp_path / "markers" / f"node-{p}" for p in range(3)]
    device = tmp_path / "device"
    for folder in (*folders, device):
        folder.mkdir()
    rng = np.random.default_rng(1)
    np.savez(device / "train.npz", x=rng.normal(size=(60, 1, 8, 8)).astype(np.float32),
             y=np.arange(60, dtype=np.int64) % 10)
    tree = {**planted.tree(), "name": "node-imports", "rounds": 2, "data": {"dataset": f"{planted.module}:load",
                                                                          "num_clients": 3},
            "downlink": {"name": "topk", "density": 0.1}, "strategy": {"fraction": 1.0}, "checkpoint_every": 0}
    home = tmp_path / "flwr-home"
    env = {**flower_env(home), "PYTHONPATH": os.pathsep.join(filter(None, [str(planted.folder),
                                                                           os.environ.get("PYTHONPATH")]))}
    env.pop(MARKERS_ENV, None)
    port = free_port()
    write_connection(home, "fedgc-node-imports", f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes, out = [], tmp_path / "out"
    try:
        processes.append(start_superlink(port, logs, env, simulation=False))
        for partition, (data_dir, plugins) in enumerate([(device, None), (None, None), (None, planted.module)]):
            node_env = {**env, MARKERS_ENV: str(folders[partition])}
            processes.append(start_supernode(port, partition, 3, logs, node_env, data_dir=data_dir, plugins=plugins))
        run_config = tmp_path / "run-config.toml"
        run_config.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(tree), "out-dir": str(out),
                                             "quiet": True, "node-wait-s": 60.0}))
        result = flwr_run(flower_app, "fedgc-node-imports", run_config, env, tmp_path / "flwr-run.log", timeout_s=300)
    finally:
        for process in reversed(processes):
            process.stop()
    assert result.returncode == 0, (tmp_path / "flwr-run.log").read_text(errors="replace")
    assert [planted.marks(folder) for folder in folders] == [[], [], [f"{planted.module}.called",
                                                                      f"{planted.module}.imported"]]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["applied_nodes"], r["failed"]) for r in rows] == [([1, 3], 1), ([1, 3], 1)]
    clients = [json.loads(line) for line in (out / "clients.jsonl").read_text().splitlines()]
    refused = [c["reason"] for c in clients if c["node"] == 2]
    assert len(refused) == 2 and all("bad-run-config" in r and f"does not import {planted.module}" in r
                                     for r in refused), refused

