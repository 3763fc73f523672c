"""ResNet-20 for CIFAR-sized images (He et al., CVPR 2016, §4.2): 3 stages × 3 basic blocks of
16/32/64 channels, parameter-free ("option A") shortcuts; 269,722 parameters for 3×32×32 inputs
and 10 classes.

``norm: group`` (the default) uses GroupNorm: BatchNorm's running statistics are local to each
client and its batch statistics follow the client's skewed labels, which hurts federated training
(Hsieh et al., ICML 2020, "The non-IID data quagmire"; they replace it with GroupNorm of 2 groups).
``norm: batch`` gives the original network; ``norm: none`` drops normalization.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, cast

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from fedgc.models.base import NoOptions


class ResNetOptions(NoOptions):
    norm: Literal["group", "batch", "none"] = Field("group", description="normalization layer")
    groups: int = Field(2, ge=1, description="GroupNorm groups (norm: group); must divide 16")


def make_norm(kind: str, channels: int, groups: int) -> nn.Module:
    layers: dict[str, Callable[[], nn.Module]] = {
        "group": lambda: nn.GroupNorm(groups, channels),
        "batch": lambda: nn.BatchNorm2d(channels),
        "none": nn.Identity,
    }
    return layers[kind]()


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, norm: str, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.norm1 = make_norm(norm, cout, groups)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.norm2 = make_norm(norm, cout, groups)
        self.pad = cout - cin
        self.stride = stride

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1 and self.pad == 0:
            return x
        x = x[:, :, ::self.stride, ::self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    Options = ResNetOptions

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, norm: str = "group", groups: int = 2,
                 blocks_per_stage: int = 3) -> None:
        super().__init__()
        if norm == "group" and 16 % groups:
            raise ValueError(f"groups: {groups} does not divide 16 channels")
        channels = input_shape[0]
        self.stem = nn.Sequential(nn.Conv2d(channels, 16, 3, padding=1, bias=False), make_norm(norm, 16, groups),
                                  nn.ReLU())
        blocks: list[nn.Module] = []
        cin = 16
        for stage, cout in enumerate((16, 32, 64)):
            for i in range(blocks_per_stage):
                blocks.append(BasicBlock(cin, cout, 2 if stage > 0 and i == 0 else 1, norm, groups))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(64, num_classes)
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(module.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.blocks(self.stem(x))
        return cast(torch.Tensor, self.head(F.adaptive_avg_pool2d(out, 1).flatten(1)))  # nn.Module.__call__: Any
