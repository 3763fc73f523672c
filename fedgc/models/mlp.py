"""Perceptrons for any input shape: an MLP (``hidden`` layer widths) and multinomial logistic regression."""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, cast

import torch
from pydantic import Field
from torch import nn

from fedgc.models.base import NoOptions


class MLPOptions(NoOptions):
    hidden: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [128], max_length=64,
                                                      description="widths of the hidden ReLU layers (at most 64)")


class MLP(nn.Module):
    Options: ClassVar[type[NoOptions]] = MLPOptions

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: list[int] | int = 128) -> None:
        super().__init__()
        widths = [hidden] if isinstance(hidden, int) else list(hidden)
        layers: list[nn.Module] = [nn.Flatten()]
        fan_in = math.prod(input_shape)
        for width in widths:
            layers += [nn.Linear(fan_in, width), nn.ReLU()]
            fan_in = width
        layers.append(nn.Linear(fan_in, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.net(x))  # nn.Module.__call__ is typed Any


class McMahan2NN(MLP):
    """The "2NN" of McMahan et al. (AISTATS 2017): two hidden layers of 200; 199,210 parameters on MNIST."""

    Options = NoOptions

    def __init__(self, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__(input_shape, num_classes, hidden=[200, 200])


class LogisticRegression(nn.Module):
    """Multinomial logistic regression (the model of FedProx's synthetic and MNIST experiments)."""

    Options = NoOptions

    def __init__(self, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.net(x))  # nn.Module.__call__ is typed Any
