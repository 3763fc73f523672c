"""Specifications of fedgc.models: shapes, parameter counts, seeding, options."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedgc.data.base import ArrayDataset
from fedgc.execution.training import evaluate, train_local
from fedgc.models import MODELS, build_model, parameter_count, validate_model_options

# name, input shape, classes, parameters (hand-checked against the papers' architectures)
CASES = [
    ("mlp", (1, 8, 8), 10, 64 * 128 + 128 + 128 * 10 + 10),
    ("logreg", (60,), 10, 610),  # FedProx synthetic
    ("mnist_2nn", (1, 28, 28), 10, 199_210),  # McMahan et al. 2NN
    ("small_cnn", (1, 8, 8), 10, 9_930),
    ("mnist_cnn", (1, 28, 28), 10, 1_663_370),  # McMahan et al. CNN
    ("resnet20", (3, 32, 32), 10, 269_722),  # He et al. ResNet-20, option A shortcuts
    ("char_lstm", (80,), 80, 819_920),  # LEAF Shakespeare LSTM (PyTorch's two LSTM bias vectors)
]


def dummy_batch(name: str, shape: tuple[int, ...], classes: int, n: int = 4) -> torch.Tensor:
    if name == "char_lstm":
        return torch.randint(0, classes, (n, *shape))
    return torch.randn(n, *shape)


@pytest.mark.parametrize("name, shape, classes, params", CASES)
def test_forward_shape_and_parameter_count(name, shape, classes, params):
    model = build_model(name, shape, classes, seed=0)
    assert parameter_count(model) == params
    assert model(dummy_batch(name, shape, classes)).shape == (4, classes)


def test_every_registered_model_is_covered():
    assert {c[0] for c in CASES} == set(MODELS)


@pytest.mark.parametrize("name, shape, classes, params", CASES)
def test_same_seed_same_weights(name, shape, classes, params):
    a, b, c = (build_model(name, shape, classes, seed=s) for s in (3, 3, 4))
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)


def test_resnet20_norm_option():
    group = build_model("resnet20", (3, 32, 32), 10, 0)
    batch = build_model("resnet20", (3, 32, 32), 10, 0, {"norm": "batch"})
    plain = build_model("resnet20", (3, 32, 32), 10, 0, {"norm": "none"})
    assert any(isinstance(m, nn.GroupNorm) for m in group.modules())
    assert not any(isinstance(m, nn.BatchNorm2d) for m in group.modules())
    assert any(isinstance(m, nn.BatchNorm2d) for m in batch.modules())
    assert parameter_count(batch) == parameter_count(group) == parameter_count(plain) + 1_376
    assert build_model("resnet20", (3, 32, 32), 10, 0, {"groups": 4})(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_options_are_validated_in_one_line():
    assert validate_model_options("resnet20", None) == {"norm": "group", "groups": 2}
    assert validate_model_options("char_lstm", {"hidden_size": 128})["hidden_size"] == 128
    with pytest.raises(ValueError, match=r"options.norm: .*\(model resnet20\)"):
        validate_model_options("resnet20", {"norm": "layer"})
    with pytest.raises(ValueError, match=r"options.depth: unknown key"):
        validate_model_options("mnist_cnn", {"depth": 3})
    with pytest.raises(ValueError, match="unknown model"):
        validate_model_options("vgg", {})
    with pytest.raises(KeyError):
        build_model("vgg", (3, 32, 32), 10, 0)


def test_mlp_hidden_widths():
    model = build_model("mlp", (1, 28, 28), 10, 0, {"hidden": [200, 200]})
    assert parameter_count(model) == 199_210


def test_char_lstm_trains_on_int64_sequences_with_the_shared_training_loop():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 80, (64, 80)).astype(np.int64)
    data = ArrayDataset(x, x[:, -1].copy())  # learnable: predict the last character seen
    model = build_model("char_lstm", (80,), 80, 0, {"hidden_size": 32, "num_layers": 1})
    result = train_local(model, data, steps=3, batch_size=16, lr=0.5, generator=torch.Generator().manual_seed(0))
    assert result.samples == 48 and np.isfinite(result.mean_loss)
    accuracy, loss = evaluate(model, data)
    assert 0.0 <= accuracy <= 1.0 and np.isfinite(loss)
