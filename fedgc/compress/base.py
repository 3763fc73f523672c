"""The compressor interface: a compressor turns one tensor into a typed payload and back.

Payloads are small typed objects (never positional tuples). The wire codec in
``fedgc.flower.codec`` knows how to put each payload type into Flower records.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch

if TYPE_CHECKING:
    from fedgc.compress.config import CompressionConfig
    from fedgc.compress.memory import Memory


@dataclass(frozen=True)
class DensePayload:
    """The whole tensor; ``values`` may be fp32 or fp16."""

    values: torch.Tensor
    shape: tuple[int, ...]


@dataclass(frozen=True)
class SparsePayload:
    """Selected entries of a tensor: flat ``indices`` (int64, strictly increasing) and ``values``."""

    indices: torch.Tensor
    values: torch.Tensor
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return _numel(self.shape)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


Payload = DensePayload | SparsePayload


@dataclass
class CompressionContext:
    """What a compressor may know about the call besides the tensor itself."""

    round: int = 1
    density: float = 1.0
    generator: torch.Generator | None = None
    # Number of clients whose updates are aggregated in this round (DGC's N for clipping).
    num_clients: int = 1
    stats: dict[str, float] = field(default_factory=dict)


class Compressor(ABC):
    """One compression method. Stateless: error feedback lives in a ``Memory``."""

    name: ClassVar[str]

    @classmethod
    def from_config(cls, config: "CompressionConfig") -> "Compressor":
        """Build the compressor from the scenario's ``compression`` section."""
        return cls()

    @classmethod
    def make_memory(cls, config: "CompressionConfig") -> "Memory":
        """The error-feedback memory this method uses (override for method-specific memories)."""
        from fedgc.compress.memory import NoMemory, ResidualMemory

        return ResidualMemory() if config.error_feedback else NoMemory()

    def prepare_update(self, update: dict[str, torch.Tensor], ctx: CompressionContext) -> dict[str, torch.Tensor]:
        """Hook on the whole update before per-tensor compensation (DGC clips gradients here)."""
        return update

    @abstractmethod
    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> Payload:
        """Encode ``tensor`` (the parameter called ``name``)."""

    def decompress(self, payload: Payload) -> torch.Tensor:
        """Rebuild a dense fp32 tensor from ``payload``."""
        return decompress(payload)


def decompress(payload: Payload) -> torch.Tensor:
    """Dense fp32 view of a dense or sparse payload."""
    if isinstance(payload, DensePayload):
        return payload.values.to(torch.float32).reshape(payload.shape)
    if isinstance(payload, SparsePayload):
        out = torch.zeros(payload.numel, dtype=torch.float32)
        out[payload.indices] = payload.values.to(torch.float32)
        return out.reshape(payload.shape)
    raise TypeError(f"unknown payload type {type(payload).__name__}")
