"""Server optimizers applied to the aggregated update (Reddi et al., "Adaptive Federated Optimization").

The aggregate ``delta`` is the weighted mean of client pseudo-gradients (global − local weights),
so every optimizer *subtracts*: ``sgd`` with lr 1 is exactly FedAvg.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class ServerOptimizer:
    kind: str = "sgd"  # sgd | momentum (FedAvgM) | adam (FedAdam)
    lr: float = 1.0
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.99
    tau: float = 1e-3
    # Internal state (checkpointed with the run).
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)

    def state_dict(self) -> dict:
        return {"buffers": {name: buffer.cpu() for name, buffer in self.buffers.items()}}  # a checkpoint holds host tensors

    def load_state_dict(self, state: dict) -> None:
        self.buffers = dict(state["buffers"])

    def step(self, weights: dict[str, torch.Tensor], delta: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """New weights; ``weights`` is not modified. The buffers follow the update's device (a resumed
        run's, loaded on the host, move there at its first step)."""
        for key, buffer in self.buffers.items():
            target = delta.get(key.split("/", 1)[1])
            if target is not None and buffer.device != target.device:
                self.buffers[key] = buffer.to(target.device)
        return {name: weights[name] - self._direction(name, delta[name]) for name in weights}

    def _direction(self, name: str, d: torch.Tensor) -> torch.Tensor:
        if self.kind == "sgd":
            return self.lr * d
        if self.kind == "momentum":  # FedAvgM: v <- beta*v + delta; w <- w - lr*v
            v = self.buffers.get(f"v/{name}")
            v = d.clone() if v is None else self.momentum * v + d
            self.buffers[f"v/{name}"] = v
            return self.lr * v
        if self.kind == "adam":  # FedAdam: m, v moments of the pseudo-gradient, no bias correction
            m = self.buffers.get(f"m/{name}", torch.zeros_like(d))
            v = self.buffers.get(f"v/{name}", torch.zeros_like(d))
            m = self.beta1 * m + (1 - self.beta1) * d
            v = self.beta2 * v + (1 - self.beta2) * d * d
            self.buffers[f"m/{name}"], self.buffers[f"v/{name}"] = m, v
            return self.lr * m / (v.sqrt() + self.tau)
        raise ValueError(f"unknown server optimizer {self.kind!r}")
