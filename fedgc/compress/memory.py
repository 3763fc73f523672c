"""Error-feedback memories: what a client keeps between rounds so that nothing it chose not to send is lost.

``compensate`` runs before compression, ``update`` after it. ``restore`` puts back an update that
was produced but never applied by the server (its upload was cut or late).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch


class Memory(ABC):
    """Per-client, per-parameter state. ``state_dict`` is what goes into Flower's ``context.state``."""

    @abstractmethod
    def compensate(self, grad: torch.Tensor, name: str) -> torch.Tensor:
        """The tensor to compress: ``grad`` plus whatever the memory carries for ``name``."""

    @abstractmethod
    def update(self, name: str, compensated: torch.Tensor, sent: torch.Tensor) -> None:
        """Record that ``sent`` (dense, same shape) was transmitted out of ``compensated``."""

    def update_in_place(self, name: str, compensated: torch.Tensor, sent: torch.Tensor) -> None:
        """``update`` for a caller that no longer reads ``compensated`` (``compress_update``): a memory
        may then reuse it (DGC's turns it into its residual in place). By default ``update``."""
        self.update(name, compensated, sent)

    @abstractmethod
    def restore(self, name: str, sent: torch.Tensor) -> None:
        """An update that never reached the server goes back into the memory."""

    @abstractmethod
    def state_dict(self) -> dict[str, torch.Tensor]: ...

    @abstractmethod
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None: ...


class NoMemory(Memory):
    """No error feedback: what is not sent is dropped (and an unapplied update is lost)."""

    def compensate(self, grad: torch.Tensor, name: str) -> torch.Tensor:
        return grad

    def update(self, name: str, compensated: torch.Tensor, sent: torch.Tensor) -> None:
        return None

    def restore(self, name: str, sent: torch.Tensor) -> None:
        return None

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        return None


class ResidualMemory(Memory):
    """Plain error feedback: e ← (e + g) − sent."""

    def __init__(self) -> None:
        self.residuals: dict[str, torch.Tensor] = {}

    def compensate(self, grad: torch.Tensor, name: str) -> torch.Tensor:
        residual = self.residuals.get(name)
        return grad if residual is None else grad + residual

    def update(self, name: str, compensated: torch.Tensor, sent: torch.Tensor) -> None:
        self.residuals[name] = compensated - sent

    def restore(self, name: str, sent: torch.Tensor) -> None:
        residual = self.residuals.get(name)
        self.residuals[name] = sent.clone() if residual is None else residual + sent

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {f"residual/{k}": v for k, v in self.residuals.items()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.residuals = {k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("residual/")}
