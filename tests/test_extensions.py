"""A researcher's own model, dataset and compressor, without editing fedgc (docs/api.md, "Extending").

Each way in — a Python call, an import path in the scenario, an installed plugin's entry point — lands
in the same registry the built-ins are listed in, and runs like a built-in; each bad input is one line
naming the plugin; and a deployed client never imports code because a message named it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from pydantic import BaseModel, ConfigDict

import fedgc
from fedgc.plugins import import_paths

pytestmark = pytest.mark.usefixtures("isolated_registries")

BASE = {"name": "ext", "seed": 1, "rounds": 2,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
        "model": {"name": "mlp", "options": {"hidden": [16]}},
        "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "topk", "density": 0.1},
        "strategy": {"fraction": 0.5}, "checkpoint_every": 0}

MODULE = '''
import torch
from pydantic import BaseModel, ConfigDict
from torch import nn

import fedgc


class TinyNet(nn.Module):
    """Flatten, one hidden layer."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        hidden: int = 8

    def __init__(self, input_shape, num_classes, hidden=8):
        super().__init__()
        size = 1
        for side in input_shape:
            size *= side
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(size, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, x):
        return self.net(x)


class HalfTopK(fedgc.Compressor):
    """The half of each tensor's entries of largest magnitude."""

    name = "half_topk"

    def compress(self, tensor, name, ctx):
        flat = tensor.detach().flatten()
        k = max(1, flat.numel() // 2)
        indices = torch.topk(flat.abs(), k).indices.sort().values
        return fedgc.SparsePayload(indices=indices, values=flat[indices].float(), shape=tuple(tensor.shape))


class CoordinateMax(fedgc.Aggregator):
    """A toy unweighted rule: per coordinate, the update of largest magnitude (from 3 updates on)."""

    name = "coordinate_max"
    weighted = False

    def aggregate(self, updates, shapes, device):
        out = {}
        for name, shape in shapes.items():
            stacked = torch.stack([u.dense(name, device) for u in updates])
            pick = stacked.abs().argmax(dim=0, keepdim=True)
            out[name] = stacked.gather(0, pick).reshape(shape)
        return out


class HalfStep(fedgc.ServerOptimizer):
    """Plain FedAvg at half the step: w <- w - 0.5 * lr * delta."""

    name = "half_step"

    def direction(self, name, delta):
        return 0.5 * self.lr * delta


class Flaky(fedgc.Compressor):
    """Raises in round 2: a plugin's own bug, in the middle of a run."""

    name = "flaky"

    def compress(self, tensor, name, ctx):
        if ctx.round == 2:
            raise RuntimeError("the plugin's own bug")
        flat = tensor.detach().flatten().float()
        return fedgc.DensePayload(flat, tuple(tensor.shape))


class NotACompressor:
    name = "nope"
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``user_models`` in a temporary folder on sys.path, as a researcher's own package would be."""
    name = f"user_models_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_model_and_a_compressor_by_import_path_run_like_built_ins(user_module):
    tree = {**BASE, "model": {"name": f"{user_module}:TinyNet", "options": {"hidden": 12}},
            "compression": {"name": f"{user_module}:HalfTopK"}}
    run = fedgc.run(tree)
    assert run.summary.rounds == 2 and run.summary.updates_applied == 4
    assert type(run.model).__name__ == "TinyNet" and run.model.net[1].out_features == 12
    ratio = run.summary.compression_ratio_up
    assert 1.2 < ratio < 2.0, ratio  # half the entries, with their indices: measured on the wire like DGC's
    sources = {(p.kind, p.name): p.source for p in fedgc.registered()}
    assert sources[("model", f"{user_module}:TinyNet")] == "import path"
    assert sources[("model", "mlp")] == "built-in"


def test_a_model_a_dataset_and_a_compressor_from_python(tmp_path):
    from torch import nn

    def two_layer(input_shape, num_classes):
        return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(input_shape)), num_classes))

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    np.savez(tmp_path / "blobs.npz", x_train=x[:300], y_train=y[:300], x_test=x[300:], y_test=y[300:])
    fedgc.register_model(f"two_layer_{tmp_path.name}", two_layer)
    fedgc.register_dataset(f"blobs_{tmp_path.name}", fedgc.UserData.from_npz(tmp_path / "blobs.npz"))
    tree = {**BASE, "rounds": 5, "data": {"dataset": f"blobs_{tmp_path.name}", "num_clients": 3, "partition": "dirichlet",
                                          "alpha": 1.0},
            "model": {"name": f"two_layer_{tmp_path.name}"}, "strategy": {"fraction": 1.0},
            "client": {"local_steps": 10, "batch_size": 16, "lr": 0.5}}
    run = fedgc.run(tree)
    assert run.summary.final_accuracy > 0.8  # a linearly separable set: the user's data and model learn
    with pytest.raises(ValueError, match=r"engine .flower.: model two_layer_.* registered from Python"):
        from fedgc.runs.engines import run_flower

        run_flower(fedgc.Scenario.from_dict({**tree, "engine": "flower"}), None)


@pytest.mark.parametrize("kind", ["aggregator", "server_optimizer"])
def test_a_server_part_registered_from_python_is_refused_by_the_flower_engine_in_one_line(kind, isolated_registries):
    """The flower engine's server loop runs in Flower's simulation process, which cannot know it either."""
    from fedgc.runs.engines import run_flower

    class Mean(fedgc.Aggregator):
        name = "python_mean"
        weighted = False

        def aggregate(self, updates, shapes, device):
            return {n: torch.stack([u.dense(n, device) for u in updates]).mean(0) for n in shapes}

    class Plain(fedgc.ServerOptimizer):
        name = "python_plain"

        def direction(self, name, delta):
            return self.lr * delta

    if kind == "aggregator":
        fedgc.register_aggregator(Mean)
        strategy = {"fraction": 1.0, "aggregation": "python_mean"}
    else:
        fedgc.register_server_optimizer(Plain)
        strategy = {"fraction": 1.0, "server_optimizer": "python_plain"}
    tree = {**BASE, "engine": "flower", "strategy": strategy}
    with pytest.raises(ValueError, match=rf"engine .flower.: {kind} python_.* registered from Python"):
        run_flower(fedgc.Scenario.from_dict(tree), None)


@pytest.mark.parametrize("change, message", [
    ({"model": {"name": "{m}:Missing"}}, "model '{m}:Missing': {m} has no attribute Missing"),
    ({"model": {"name": "no_such_pkg_xyz:Net"}}, "model 'no_such_pkg_xyz:Net': cannot import no_such_pkg_xyz"),
    ({"model": {"name": "{m}:TinyNet", "options": {"width": 3}}}, "model: options.width: unknown key (model {m}:TinyNet)"),
    ({"compression": {"name": "{m}:NotACompressor"}}, "is not a Compressor subclass"),
    ({"model": {"name": "bad path:X"}}, "model: unknown model 'bad path:X'"),
])
def test_bad_plugins_are_one_line_naming_the_plugin(user_module, change, message):
    tree = {**BASE}
    for section, values in change.items():
        tree[section] = {k: (v.replace("{m}", user_module) if isinstance(v, str) else v) for k, v in values.items()}
    with pytest.raises(fedgc.ScenarioError) as err:
        fedgc.Scenario.from_dict(tree)
    assert message.replace("{m}", user_module) in str(err.value) and "\n" not in str(err.value)


def test_an_aggregation_rule_by_import_path_is_the_one_the_server_applies(user_module):
    """The user's rule runs where the built-ins run, after validation and norm bounding: with 4 clients
    per round, a rule that keeps each coordinate's largest update gives another model than the mean."""
    tree = {**BASE, "strategy": {"fraction": 1.0, "aggregation": f"{user_module}:CoordinateMax"}}
    custom, mean = fedgc.run(tree), fedgc.run({**tree, "strategy": {"fraction": 1.0}})
    assert custom.summary.updates_applied == mean.summary.updates_applied == 8
    assert any((custom.weights[k] != mean.weights[k]).any() for k in mean.weights)
    assert ("aggregator", f"{user_module}:CoordinateMax", "import path") in {
        (p.kind, p.name, p.source) for p in fedgc.registered()}
    with pytest.raises(fedgc.ScenarioError, match="unknown aggregation rule 'krum'"):
        fedgc.Scenario.from_dict({**BASE, "strategy": {"aggregation": "krum"}})


def test_a_server_optimizer_by_import_path_equals_its_built_in_equivalent(user_module):
    """HalfStep at server_lr 1.0 is sgd at server_lr 0.5: the user's optimizer is applied where sgd is."""
    custom = fedgc.run({**BASE, "strategy": {"fraction": 0.5, "server_optimizer": f"{user_module}:HalfStep"}})
    builtin = fedgc.run({**BASE, "strategy": {"fraction": 0.5, "server_lr": 0.5}})
    assert all(torch_equal(custom.weights[k], builtin.weights[k]) for k in builtin.weights)
    with pytest.raises(fedgc.ScenarioError, match="unknown server optimizer 'lamb'"):
        fedgc.Scenario.from_dict({**BASE, "strategy": {"server_optimizer": "lamb"}})


def torch_equal(a, b) -> bool:
    return bool((a == b).all())


def test_a_name_registered_twice_is_refused(tmp_path):
    from torch import nn

    fedgc.register_model(f"twice_{tmp_path.name}", nn.Linear)
    with pytest.raises(fedgc.PluginError, match=f"model 'twice_{tmp_path.name}' is registered already"):
        fedgc.register_model(f"twice_{tmp_path.name}", nn.Linear)
    fedgc.register_model(f"twice_{tmp_path.name}", nn.Bilinear, replace=True)  # a notebook cell run again
    with pytest.raises(fedgc.PluginError, match="'mlp' is registered already"):
        fedgc.register_model("mlp", nn.Linear, replace=True)  # never a built-in
    from fedgc.compress.topk import TopK

    with pytest.raises(fedgc.PluginError, match="compressor 'topk' is registered already"):
        fedgc.register_compressor(TopK)


def test_a_message_never_makes_a_node_import(user_module, tmp_path):
    """The client's side: an import path in a train message is resolved only for a module the node's
    operator listed (node config plugins=...); otherwise it stays unknown and is refused."""
    from fedgc.flower.client_config import node_known
    from fedgc.models import MODELS

    name = f"{user_module}:TinyNet"
    with import_paths.node_policy(""):
        node_known("model", name, MODELS)
    assert name not in MODELS and user_module not in sys.modules  # never imported
    with import_paths.node_policy(f"other_pkg,{user_module}"):
        node_known("model", name, MODELS)
    assert name in MODELS


def test_the_client_refuses_an_import_path_it_was_not_allowed(user_module):
    """Through the real ClientApp: the refusal is a reply with its reason, and nothing is imported."""
    from fedgc.flower import keys
    from tests.test_client_message_hostile import answer, base_content, context

    content = base_content()
    content.config_records[keys.CLIENT_CONFIG][keys.CC_MODEL] = f"{user_module}:TinyNet"
    assert answer(content, context()) == "unknown-model"
    content = base_content()
    content.config_records[keys.CLIENT_CONFIG][keys.CC_COMPRESSOR] = f"{user_module}:HalfTopK"
    assert answer(content, context()) == "bad-client-config"
    assert user_module not in sys.modules


def test_fedgc_plugins_lists_built_ins_and_an_installed_plugin(tmp_path):
    """An installed package announcing itself in the fedgc.plugins entry-point group (a .dist-info on
    the path, as pip writes it) is listed by ``fedgc plugins`` with where it came from."""
    package = tmp_path / "site"
    (package / "acme_fl").mkdir(parents=True)
    (package / "acme_fl" / "__init__.py").write_text(textwrap.dedent('''
        from torch import nn

        import fedgc


        def register():
            fedgc.register_model("acme_linear", lambda shape, classes: nn.Linear(shape[-1], classes))
    '''))
    info = package / "acme_fl-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-fl\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[fedgc.plugins]\nacme = acme_fl:register\n")
    env = {**os.environ, "PYTHONPATH": str(package)}
    out = subprocess.run([sys.executable, "-m", "fedgc", "plugins"], check=False, capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = {tuple(line.split()[:3]) for line in out.stdout.splitlines()}
    assert ("model", "acme_linear", "plugin") in lines and ("model", "small_cnn", "built-in") in lines
    assert ("compressor", "dgc", "built-in") in lines and ("dataset", "digits", "built-in") in lines


def test_a_users_rule_and_optimizer_take_their_settings_from_the_strategy_section(user_module):
    """``strategy.aggregation_options`` and ``strategy.server_optimizer_options`` are validated by the
    plugin's own ``Options`` and reach its ``__init__``; a key it does not declare is one line."""
    import torch

    class Scaled(fedgc.ServerOptimizer):
        name = f"scaled_{user_module}"

        class Options(BaseModel):
            model_config = ConfigDict(extra="forbid")
            factor: float = 1.0

        def __init__(self, lr=1.0, factor=1.0):
            super().__init__(lr)
            self.factor = factor

        def direction(self, name, delta):
            return self.lr * self.factor * delta

    fedgc.register_server_optimizer(Scaled)
    custom = fedgc.run({**BASE, "strategy": {"fraction": 0.5, "server_optimizer": Scaled.name,
                                             "server_optimizer_options": {"factor": 0.25}}})
    builtin = fedgc.run({**BASE, "strategy": {"fraction": 0.5, "server_lr": 0.25}})
    assert all(torch.equal(custom.weights[k], builtin.weights[k]) for k in builtin.weights)
    with pytest.raises(fedgc.ScenarioError, match=rf"server_optimizer_options.speed: unknown key \({Scaled.name}'s "
                                                  r"options: factor\)"):
        fedgc.Scenario.from_dict({**BASE, "strategy": {"server_optimizer": Scaled.name,
                                                       "server_optimizer_options": {"speed": 2}}})
    with pytest.raises(fedgc.ScenarioError, match=r"aggregation_options.k: unknown key \(mean's options: none\)"):
        fedgc.Scenario.from_dict({**BASE, "strategy": {"aggregation_options": {"k": 2}}})


def test_a_plugin_that_raises_during_a_round_fails_its_clients_and_the_run_goes_on(user_module):
    run = fedgc.run({**BASE, "rounds": 3, "compression": {"name": f"{user_module}:Flaky"}})
    assert [(r.round, r.failed, r.applied) for r in run.rounds] == [(1, 0, 2), (2, 2, 0), (3, 0, 2)]
    reasons = {c.reason for c in run.clients if c.outcome == "failed"}
    assert reasons == {"RuntimeError: the plugin's own bug"} and run.summary.stopped_reason == "completed"


def test_a_bad_plugin_on_the_command_line_is_one_line_and_exit_2(user_module, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(fedgc.Scenario.from_dict(BASE).to_yaml().replace("name: topk", f"name: {user_module}:Missing"))
    out = subprocess.run([sys.executable, "-m", "fedgc", "run", str(scenario), "--out", str(tmp_path / "r")],
                         check=False, capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"error: compressor '{user_module}:Missing': {user_module} has no attribute Missing")
