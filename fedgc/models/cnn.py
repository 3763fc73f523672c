"""Convolutional models: a small CNN for 8×8 digits and McMahan et al.'s MNIST CNN (2 conv + 2 fc)."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from fedgc.models.base import NoOptions


class SmallCNN(nn.Module):
    """Two 3×3 conv layers and one linear head; 9,930 parameters on 1×8×8 inputs (10 classes)."""

    Options = NoOptions

    def __init__(self, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        channels, height, width = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * (height // 2) * (width // 2), num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.head(self.features(x)))  # nn.Module.__call__ is typed Any


class McMahanCNN(nn.Module):
    """The "CNN" of McMahan et al. (AISTATS 2017): 5×5 conv 32, pool, 5×5 conv 64, pool, fc 512, fc 10.

    1,663,370 parameters on 28×28 inputs.
    """

    Options = NoOptions

    def __init__(self, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        channels, height, width = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(channels, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * (height // 4) * (width // 4), 512), nn.ReLU(),
                                  nn.Linear(512, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.head(self.features(x)))  # nn.Module.__call__ is typed Any
