"""The compressor interface: a compressor turns one tensor into a typed payload and back.

Payloads are small typed objects (never positional tuples). The wire codec in
``fedgc.wire.codec`` turns each payload type into bytes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from pydantic import BaseModel, ConfigDict

from fedgc.compress.payloads import (  # noqa: F401  (re-exported: payload types live in payloads.py)
    DensePayload,
    HalfPayload,
    LowRankPayload,
    NaturalPayload,
    Payload,
    QuantizedPayload,
    SignPayload,
    SparsePayload,
    SparseTernaryPayload,
    TernaryPayload,
    VotePayload,
    decompress,
)

if TYPE_CHECKING:
    from fedgc.compress.config import CompressionConfig
    from fedgc.compress.memory import Memory


@dataclass
class CompressionContext:
    """What a compressor may know about the call besides the tensor itself."""

    round: int = 1
    density: float = 1.0
    generator: torch.Generator | None = None
    # Number of clients whose updates are aggregated in this round (DGC's N for clipping).
    num_clients: int = 1
    # The client's memory, for methods whose state must persist with it (PowerSGD's warm-start Q).
    memory: Memory | None = None


class NoOptions(BaseModel):
    """The options of a compressor that takes none beyond the common ones (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Compressor(ABC):
    """One compression method. Stateless: error feedback lives in a ``Memory``."""

    name: ClassVar[str]
    # The compressor's own options (a pydantic model with defaults, bounds and descriptions): each
    # field is a key of the scenario's ``compression`` section (fedgc.compress.config).
    Options: ClassVar[type[BaseModel]] = NoOptions

    @classmethod
    def from_config(cls, config: CompressionConfig) -> Compressor:
        """Build the compressor from the scenario's ``compression`` section."""
        return cls()

    @classmethod
    def make_memory(cls, config: CompressionConfig) -> Memory:
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

