"""A ClientApp reuses one model of a kind from client to client (``client_app.worker_model``): the
weights of each message overwrite its whole state, so every update is what a model built anew for the
message gives, bit for bit — for each built-in kind of model, normalization layers included."""

from __future__ import annotations

import json

import pytest

from fedgc.flower.client import client_app
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.loop import run_rounds
from fedgc.scenario.model import validate

MODELS = {  # name: options, on 8x8 digits
    "mlp": {},
    "small_cnn": {},
    "resnet20": {"norm": "batch"},  # BatchNorm: running statistics are buffers
    "logreg": {},
}


def clients_rows(tree: dict, tmp_path, name: str) -> list[dict]:
    scenario = validate(tree)
    out = tmp_path / name
    run_rounds(InlineGrid.for_scenario(scenario), scenario, out)
    return [json.loads(line) for line in (out / "clients.jsonl").read_text().splitlines()] + \
        [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_reused_worker_model_trains_as_a_new_one(model, tiny_scenario, tmp_path, monkeypatch):
    tree = {**tiny_scenario, "rounds": 3, "model": {"name": model, "options": MODELS[model]},
            "compression": {"name": "dgc", "density": 0.05, "momentum": 0.9},
            "client": {"local_steps": 3, "batch_size": 16, "lr": 0.05, "momentum": 0.5}}
    client_app._WORKERS.clear()
    reused = clients_rows(tree, tmp_path, "reused")
    assert any(key[0] is client_app.MODELS[model] for key in client_app._WORKERS)  # the path under test ran
    monkeypatch.setattr(client_app, "worker_model", lambda settings, device: None)
    fresh = clients_rows(tree, tmp_path, "fresh")
    assert reused == fresh


def test_a_plugin_model_is_built_anew_for_every_message(isolated_registries):
    from types import SimpleNamespace

    import torch

    from fedgc.models import MODELS as REGISTRY

    class Plugin(torch.nn.Module):
        pass

    REGISTRY["plugin_net"] = Plugin
    settings = SimpleNamespace(model="plugin_net", input_shape=(1, 8, 8), num_classes=10, seed=0, model_options={})
    assert client_app.worker_model(settings, torch.device("cpu")) is None


def test_the_model_s_tensors_are_read_as_flower_reads_them():
    import torch
    from flwr.app import ArrayRecord

    from fedgc.models import build_model

    for name, shape in (("resnet20", (3, 8, 8)), ("char_lstm", (80,)), ("mnist_2nn", (1, 28, 28))):
        state = build_model(name, shape, 10 if name != "char_lstm" else 80, 3).state_dict()
        state["scalar"], state["counts"] = torch.tensor(2.5), torch.arange(6, dtype=torch.int64).reshape(2, 3)
        record = ArrayRecord(state)
        ours, flowers = client_app.model_tensors(record), record.to_torch_state_dict()
        assert list(ours) == list(flowers)
        for key in ours:
            assert ours[key].dtype == flowers[key].dtype and ours[key].shape == flowers[key].shape
            assert torch.equal(ours[key], flowers[key]), key
            assert ours[key].is_contiguous()
