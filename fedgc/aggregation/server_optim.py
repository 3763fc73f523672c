"""Server optimizers applied to the aggregated update (Reddi et al., "Adaptive Federated Optimization").

The aggregate ``delta`` is the weighted mean of client pseudo-gradients (global − local weights),
so every optimizer *subtracts* its ``direction``: ``sgd`` with lr 1 is exactly FedAvg.
``SERVER_OPTIMIZERS`` maps ``strategy.server_optimizer`` to a class; a researcher's own subclasses
``ServerOptimizer`` and is added with ``fedgc.register_server_optimizer`` or named by import path.
Its state (``buffers``) is checkpointed with the run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol

import torch
from pydantic import BaseModel

from fedgc.plugins.options import NoOptions


class StrategySettings(Protocol):
    """What a server optimizer reads of the scenario's ``strategy`` section (``StrategyConfig``, whose
    module imports this one: a structural type, not an import, so that no import circle forms)."""

    @property
    def server_lr(self) -> float: ...
    @property
    def server_momentum(self) -> float: ...
    @property
    def adam_beta1(self) -> float: ...
    @property
    def adam_beta2(self) -> float: ...
    @property
    def adam_tau(self) -> float: ...
    @property
    def server_optimizer_options(self) -> dict[str, Any]: ...


class ServerOptimizer(ABC):
    """One server optimizer. A subclass sets ``name``, implements ``direction`` (what is subtracted from
    the weights for one parameter) and, when it has settings, ``from_strategy`` (they come from the
    scenario's ``strategy`` section: ``server_lr``, ``server_momentum``, ``adam_*``). State it keeps
    between rounds goes in ``self.buffers`` (tensors by name), which ``state_dict`` checkpoints."""

    name: ClassVar[str]
    # Settings beyond the strategy section's: ``strategy.server_optimizer_options``, validated by this
    # model (unknown keys refused) and passed to ``__init__`` as keywords by ``from_strategy``.
    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, lr: float = 1.0) -> None:
        self.lr = lr
        self.buffers: dict[str, torch.Tensor] = {}

    @classmethod
    def from_strategy(cls, strategy: StrategySettings) -> ServerOptimizer:
        options = cls.Options.model_validate(strategy.server_optimizer_options).model_dump()
        return cls(lr=strategy.server_lr, **options)

    @abstractmethod
    def direction(self, name: str, delta: torch.Tensor) -> torch.Tensor:
        """What the parameter ``name`` moves by (subtracted), given the round's aggregate ``delta``."""

    def state_dict(self) -> dict[str, Any]:
        return {"buffers": {name: buffer.cpu() for name, buffer in self.buffers.items()}}  # a checkpoint holds host tensors

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffers = dict(state["buffers"])

    def step(self, weights: dict[str, torch.Tensor], delta: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """New weights; ``weights`` is not modified. The buffers follow the update's device (a resumed
        run's, loaded on the host, move there at its first step)."""
        for key, buffer in self.buffers.items():
            target = delta.get(key.split("/", 1)[1])
            if target is not None and buffer.device != target.device:
                self.buffers[key] = buffer.to(target.device)
        return {name: weights[name] - self.direction(name, delta[name]) for name in weights}


class SGD(ServerOptimizer):
    """w ← w − lr·delta (lr 1: FedAvg)."""

    name = "sgd"

    def direction(self, name: str, delta: torch.Tensor) -> torch.Tensor:
        # 1.0·x is x, bit for bit: at lr 1 (FedAvg) the multiplication is skipped.
        return delta if self.lr == 1.0 else self.lr * delta


class Momentum(ServerOptimizer):
    """FedAvgM: v ← β·v + delta; w ← w − lr·v."""

    name = "momentum"

    def __init__(self, lr: float = 1.0, momentum: float = 0.9) -> None:
        super().__init__(lr)
        self.momentum = momentum

    @classmethod
    def from_strategy(cls, strategy: StrategySettings) -> ServerOptimizer:
        return cls(lr=strategy.server_lr, momentum=strategy.server_momentum)

    def direction(self, name: str, delta: torch.Tensor) -> torch.Tensor:
        v = self.buffers.get(f"v/{name}")
        v = delta.clone() if v is None else self.momentum * v + delta
        self.buffers[f"v/{name}"] = v
        return self.lr * v


class Adam(ServerOptimizer):
    """FedAdam: m, v moments of the pseudo-gradient, no bias correction; w ← w − lr·m / (√v + τ)."""

    name = "adam"

    def __init__(self, lr: float = 1.0, beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3) -> None:
        super().__init__(lr)
        self.beta1, self.beta2, self.tau = beta1, beta2, tau

    @classmethod
    def from_strategy(cls, strategy: StrategySettings) -> ServerOptimizer:
        return cls(lr=strategy.server_lr, beta1=strategy.adam_beta1, beta2=strategy.adam_beta2, tau=strategy.adam_tau)

    def direction(self, name: str, delta: torch.Tensor) -> torch.Tensor:
        m = self.buffers.get(f"m/{name}", torch.zeros_like(delta))
        v = self.buffers.get(f"v/{name}", torch.zeros_like(delta))
        m = self.beta1 * m + (1 - self.beta1) * delta
        v = self.beta2 * v + (1 - self.beta2) * delta * delta
        self.buffers[f"m/{name}"], self.buffers[f"v/{name}"] = m, v
        return self.lr * m / (v.sqrt() + self.tau)


SERVER_OPTIMIZERS: dict[str, type[ServerOptimizer]] = {cls.name: cls for cls in (SGD, Momentum, Adam)}


def check_server_optimizer(cls: type) -> None:
    """TypeError unless ``cls`` is a ``ServerOptimizer`` subclass that implements ``direction``."""
    if not (isinstance(cls, type) and issubclass(cls, ServerOptimizer)):
        raise TypeError(f"{cls!r} is not a ServerOptimizer subclass")
    if getattr(cls, "__abstractmethods__", None):
        raise TypeError(f"{cls.__name__} does not implement {', '.join(sorted(cls.__abstractmethods__))}")
