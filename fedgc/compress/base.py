"""The compressor interface: a compressor turns one tensor into a typed payload and back.

A compressor is a ``Compressor`` subclass with a ``name``, an ``Options`` model (a subclass of
``CompressorOptions``: its own keys, with defaults, bounds and descriptions) and ``compress``; it is
built from its options by ``from_config(options)`` and keeps its error feedback in the ``Memory``
that ``make_memory(options)`` returns. It imports nothing of the scenario: the ``compression`` and
``downlink`` sections (``fedgc.compress.config``) validate a compressor's options with its ``Options``
model and hand it an instance. Payloads are small typed objects (never positional tuples). The wire
codec in ``fedgc.wire.codec`` turns each payload type into bytes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from fedgc.compress.payloads import (  # re-exported (__all__): payload types live in payloads.py
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
    from fedgc.compress.memory import Memory

__all__ = ["V3_VALUE_DTYPES", "CompressionContext", "Compressor", "CompressorOptions", "DensePayload", "HalfPayload",
           "LowRankPayload", "NaturalPayload", "Payload", "QuantizedPayload", "SignPayload", "SparsePayload",
           "SparseTernaryPayload", "TernaryPayload", "VotePayload", "decompress"]


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


# value_dtype's encodings of wire format v3 (docs/wire-format.md, "Format v3"): a sparse payload's
# values as int8 or int4 codes with one scale, or as signs and their mean magnitude.
V3_VALUE_DTYPES = ("int8", "int4", "sign")


class CompressorOptions(BaseModel):
    """The options every compressor's client reads (how ``compress_update`` encodes the payloads and
    whether the unsent rest is kept); a compressor's ``Options`` subclasses it and adds its own keys.
    Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    error_feedback: bool = Field(default=True, description="keep what was not sent and add it to the next update")
    value_dtype: Literal["fp32", "fp16", "int8", "int4", "sign"] = Field(
        default="fp32", description="the sent values' precision: fp32, fp16 (half the bytes); int8, int4 or sign "
                                    "(wire format v3, sparse values only, the rounding kept by error feedback)")
    dense_small_tensors: bool = Field(default=True, description="send tensors with dim() <= 1 (biases, norms) dense")


class Compressor(ABC):
    """One compression method. Stateless: error feedback lives in a ``Memory``.

    A subclass sets ``name`` (its scenario name) and, when it takes options of its own, ``Options`` (a
    ``CompressorOptions`` subclass whose new field names no other compressor uses with another meaning);
    it implements ``compress`` and, when it has parameters, ``from_config``."""

    name: ClassVar[str]
    # The compressor's options: the keys of the scenario's ``compression`` section (and of ``downlink``,
    # less ``error_feedback``) that it reads, validated by this model (fedgc.compress.config).
    Options: ClassVar[type[CompressorOptions]] = CompressorOptions
    # False for a method that keeps its residual whatever ``error_feedback`` says (DGC): the option is
    # then accepted and ignored, and not sent to its clients.
    reads_error_feedback: ClassVar[bool] = True
    # True for a method that keeps ``ctx.density`` of the entries (the round's density, after warm-up):
    # its density is recorded per round and it can be warmed up (``compression.warmup_for``).
    reads_density: ClassVar[bool] = False
    # True for a method whose payloads are ``SparsePayload``s: their values can travel in wire format
    # v3's encodings (``value_dtype`` int8, int4, sign; ``V3_VALUE_DTYPES``), which the ``compression``
    # and ``downlink`` sections refuse for any other method.
    sparse_values: ClassVar[bool] = False

    @classmethod
    def from_config(cls, options: CompressorOptions) -> Compressor:
        """Build the compressor from its options (an instance of ``cls.Options``)."""
        return cls()

    @classmethod
    def make_memory(cls, options: CompressorOptions) -> Memory:
        """The error-feedback memory this method uses (override for method-specific memories)."""
        from fedgc.compress.memory import NoMemory, ResidualMemory

        return ResidualMemory() if options.error_feedback else NoMemory()

    def prepare_update(self, update: dict[str, torch.Tensor], ctx: CompressionContext) -> dict[str, torch.Tensor]:
        """Hook on the whole update before per-tensor compensation (DGC clips gradients here)."""
        return update

    @abstractmethod
    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> Payload:
        """Encode ``tensor`` (the parameter called ``name``)."""

    def decompress(self, payload: Payload) -> torch.Tensor:
        """Rebuild a dense fp32 tensor from ``payload``."""
        return decompress(payload)

