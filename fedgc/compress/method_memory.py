"""Memories of methods with state beyond the residual: signum's momentum and PowerSGD's warm-start Q.

Both also do plain error feedback when ``error_feedback`` is on (e ← compensated − sent). Everything
lives in ``state_dict`` so it survives in the client's Flower ``context.state`` between rounds.
"""

from __future__ import annotations

import torch

from fedgc.compress.memory import ResidualMemory

MOMENTUM_KEY = "signum_momentum/"
Q_KEY = "powersgd_q/"


class _OptionalResidual(ResidualMemory):
    def __init__(self, error_feedback: bool) -> None:
        super().__init__()
        self.error_feedback = error_feedback

    def update(self, name: str, compensated: torch.Tensor, sent: torch.Tensor) -> None:
        if self.error_feedback:
            super().update(name, compensated, sent)

    def restore(self, name: str, sent: torch.Tensor) -> None:
        if self.error_feedback:
            super().restore(name, sent)


class SignumMemory(_OptionalResidual):
    """m ← β·m + (1 − β)·g; the tensor compressed is m (+ the residual with error feedback)."""

    def __init__(self, beta: float, error_feedback: bool) -> None:
        super().__init__(error_feedback)
        self.beta = beta
        self.momentums: dict[str, torch.Tensor] = {}

    def compensate(self, grad: torch.Tensor, name: str) -> torch.Tensor:
        momentum = self.momentums.get(name, torch.zeros_like(grad))
        self.momentums[name] = self.beta * momentum + (1.0 - self.beta) * grad
        return super().compensate(self.momentums[name], name)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {**super().state_dict(), **{MOMENTUM_KEY + k: v for k, v in self.momentums.items()}}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        super().load_state_dict(state)
        self.momentums = {k.removeprefix(MOMENTUM_KEY): v for k, v in state.items() if k.startswith(MOMENTUM_KEY)}


class PowerSGDMemory(_OptionalResidual):
    """Residuals plus, per parameter, the last Q (cols × r) that PowerSGD starts its next iteration from."""

    def __init__(self, error_feedback: bool) -> None:
        super().__init__(error_feedback)
        self.qs: dict[str, torch.Tensor] = {}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {**super().state_dict(), **{Q_KEY + k: v for k, v in self.qs.items()}}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        super().load_state_dict(state)
        self.qs = {k.removeprefix(Q_KEY): v for k, v in state.items() if k.startswith(Q_KEY)}
