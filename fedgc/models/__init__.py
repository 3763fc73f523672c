"""Model registry (no Flower imports here)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from fedgc.models.cnn import McMahanCNN, SmallCNN
from fedgc.models.mlp import MLP

MODELS: dict[str, Callable[[tuple[int, ...], int], nn.Module]] = {
    "mlp": MLP,
    "small_cnn": SmallCNN,
    "mnist_cnn": McMahanCNN,
}


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, seed: int) -> nn.Module:
    """Build the named model with weights drawn from ``seed`` (same seed, same initial model)."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MODELS[name](input_shape, num_classes)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
