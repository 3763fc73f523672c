"""Typed payloads: what a compressor produces for one tensor and what the wire codec carries.

Every payload knows its parameter's ``shape`` and rebuilds the dense fp32 tensor it stands for
(``to_dense``). Sign bits use 1 = negative. See docs/wire-format.md for the byte layouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from fedgc.compress.bits import unpack_bits, unpack_trits, unpack_uint

FP16_MAX = 65504.0  # the largest finite fp16: fp16 values are clamped to it before the cast
VALUE_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def to_value_dtype(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``values`` in ``dtype``; into fp16 saturated at ±65504 (fp16's largest finite value) instead of
    overflowing to ±Inf, which the server would reject. What rounding and saturation lose is the
    difference between the compensated tensor and what was sent: the error-feedback memory keeps it."""
    if dtype == torch.float16:
        values = values.clamp(-FP16_MAX, FP16_MAX)
    return values.to(dtype)


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _signed(magnitude: float, signs: torch.Tensor, n: int, device: torch.device) -> torch.Tensor:
    negative = unpack_bits(signs, n).to(device)
    value = torch.as_tensor(magnitude, device=device)
    return torch.where(negative, -value, value).to(torch.float32)


@dataclass(frozen=True)
class DensePayload:
    """The whole tensor; ``values`` may be fp32 or fp16."""

    values: torch.Tensor
    shape: tuple[int, ...]

    def to_dense(self) -> torch.Tensor:
        return self.values.to(torch.float32).reshape(self.shape)


@dataclass(frozen=True)
class HalfPayload(DensePayload):
    """A dense payload whose values are always fp16 (the ``fp16`` compressor), whatever value_dtype says."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", self.values.to(torch.float16))


@dataclass(frozen=True)
class SparsePayload:
    """Selected entries of a tensor: flat ``indices`` (int64, strictly increasing) and ``values``."""

    indices: torch.Tensor
    values: torch.Tensor
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return _numel(self.shape)

    def to_dense(self) -> torch.Tensor:
        out = torch.zeros(self.numel, dtype=torch.float32, device=self.values.device)
        out[self.indices] = self.values.to(torch.float32)
        return out.reshape(self.shape)


@dataclass(frozen=True)
class CodedSparsePayload(SparsePayload):
    """A sparse payload whose values travel in a sub-16-bit encoding of wire format v3
    (``fedgc.compress.quantize``): ``values`` are the f32 values the receiver rebuilds (so everything that
    reads a ``SparsePayload`` reads this one unchanged); ``codes`` and ``scales`` are what the wire
    holds, so re-encoding gives the same bytes. ``block`` is the values per scale (0: one scale)."""

    encoding: str
    block: int
    codes: torch.Tensor
    scales: torch.Tensor


@dataclass(frozen=True)
class SignPayload:
    """One bit per element: +``pos_scale`` (bit 0) or −``neg_scale`` (bit 1). Decoded and summed."""

    signs: torch.Tensor  # uint8, packed bits
    pos_scale: float
    neg_scale: float
    shape: tuple[int, ...]

    def to_dense(self) -> torch.Tensor:
        n = _numel(self.shape)
        negative = unpack_bits(self.signs, n)
        out = torch.where(negative, torch.tensor(-self.neg_scale, device=negative.device),
                          torch.tensor(self.pos_scale, device=negative.device))
        return out.to(torch.float32).reshape(self.shape)


@dataclass(frozen=True)
class VotePayload:
    """One bit per element, ±``scale``; the server aggregates these by weighted majority vote."""

    signs: torch.Tensor  # uint8, packed bits
    scale: float
    shape: tuple[int, ...]

    def to_dense(self) -> torch.Tensor:
        return _signed(self.scale, self.signs, _numel(self.shape), self.signs.device).reshape(self.shape)


@dataclass(frozen=True)
class TernaryPayload:
    """Codes 0 → 0, 1 → +scale, 2 → −scale, packed five per byte (1.6 bits per element)."""

    trits: torch.Tensor  # uint8, base-3 packed
    scale: float
    shape: tuple[int, ...]

    def to_dense(self) -> torch.Tensor:
        codes = unpack_trits(self.trits, _numel(self.shape))
        lookup = torch.tensor([0.0, self.scale, -self.scale], dtype=torch.float32, device=codes.device)
        return lookup[codes].reshape(self.shape)


@dataclass(frozen=True)
class QuantizedPayload:
    """QSGD: per bucket of ``bucket_size`` entries an L2 ``norms`` entry; per element a level in
    [−levels, levels] stored as code = level + levels in ``width = bit_length(2·levels)`` bits."""

    codes: torch.Tensor  # uint8, packed ``width``-bit codes
    norms: torch.Tensor  # fp32, one per bucket
    levels: int
    bucket_size: int
    shape: tuple[int, ...]

    @property
    def width(self) -> int:
        return (2 * self.levels).bit_length()

    def to_dense(self) -> torch.Tensor:
        """``x[i] = norm[i // d] · level[i] / s`` in f32, without expanding the norms: the levels are
        viewed as (buckets × d) and each row scaled by its norm. A bucket longer than the tensor is
        one bucket (d is clamped to n), so nothing here is sized by ``bucket_size``."""
        n = _numel(self.shape)
        d = max(1, min(int(self.bucket_size), n))
        buckets = -(-n // d)
        if self.norms.numel() != buckets:
            raise ValueError(f"{self.norms.numel()} norms for {buckets} buckets")
        device = self.norms.device  # the codes are bytes unpacked on the host
        level = (unpack_uint(self.codes, n, self.width) - self.levels).to(device=device, dtype=torch.float32)
        padded = torch.zeros(buckets * d, dtype=torch.float32, device=device)  # < n + d ≤ 2n entries
        padded[:n] = level
        out = padded.view(buckets, d).mul_(self.norms.to(torch.float32)[:, None]).div_(self.levels)
        return out.view(-1)[:n].reshape(self.shape)


@dataclass(frozen=True)
class NaturalPayload:
    """Natural compression: each element ±2**(e − 127); ``exponents`` uint8 (0 = zero, 255 invalid)."""

    exponents: torch.Tensor  # uint8, one per element
    signs: torch.Tensor  # uint8, packed bits
    shape: tuple[int, ...]

    def to_dense(self) -> torch.Tensor:
        n = _numel(self.shape)
        negative = unpack_bits(self.signs, n).to(device=self.exponents.device, dtype=torch.int32)
        bits = (negative << 31) | (self.exponents.to(torch.int32) << 23)
        return bits.view(torch.float32).reshape(self.shape)


@dataclass(frozen=True)
class LowRankPayload:
    """PowerSGD factors: the tensor as an (rows × cols) matrix ≈ ``p`` (rows × r) · ``q``ᵀ (cols × r)."""

    p: torch.Tensor
    q: torch.Tensor
    shape: tuple[int, ...]

    def to_dense(self) -> torch.Tensor:
        """``x[i, j] = Σ_t p[i, t] · q[j, t]`` bit-reproducibly (docs/wire-format.md): in f32, starting
        from +0, adding the rank terms in order t = 0, 1, …, each product rounded before its sum (no
        FMA). ``outer`` and ``add_`` are one correctly rounded IEEE operation per element; a matmul
        would leave order and fusing to the BLAS."""
        p, q = self.p.to(torch.float32), self.q.to(torch.float32)
        out = torch.zeros(p.shape[0], q.shape[0], dtype=torch.float32, device=p.device)
        for t in range(p.shape[1]):
            out.add_(torch.outer(p[:, t], q[:, t]))
        return out.reshape(self.shape)


@dataclass(frozen=True)
class SparseTernaryPayload:
    """STC: ``indices`` (as SparsePayload) each carrying ±``scale``; one sign bit per index."""

    indices: torch.Tensor
    signs: torch.Tensor  # uint8, packed bits, one per index
    scale: float
    shape: tuple[int, ...]

    def to_dense(self) -> torch.Tensor:
        out = torch.zeros(_numel(self.shape), dtype=torch.float32, device=self.indices.device)
        out[self.indices] = _signed(self.scale, self.signs, self.indices.numel(), self.indices.device)
        return out.reshape(self.shape)


Payload = (DensePayload | SparsePayload | SignPayload | VotePayload | TernaryPayload | QuantizedPayload
           | NaturalPayload | LowRankPayload | SparseTernaryPayload)
PAYLOAD_TYPES = (DensePayload, SparsePayload, SignPayload, VotePayload, TernaryPayload, QuantizedPayload,
                 NaturalPayload, LowRankPayload, SparseTernaryPayload)


def decompress(payload: Payload, device: torch.device | None = None) -> torch.Tensor:
    """Dense fp32 tensor of any payload, on ``device`` (default: where the payload's values are; bytes
    of packed bits are made and read on the host, so a payload of bits alone decodes there)."""
    if not isinstance(payload, PAYLOAD_TYPES):
        raise TypeError(f"unknown payload type {type(payload).__name__}")
    dense = payload.to_dense()
    return dense if device is None else dense.to(device)


def payload_to(payload: Payload, device: torch.device | str) -> Payload:
    """``payload`` with every tensor on ``device`` (the same object when they all are already)."""
    device = torch.device(device)
    moved: dict[str, Any] = {name: value.to(device) for name, value in payload.__dict__.items()
                              if isinstance(value, torch.Tensor) and value.device != device}
    return replace(payload, **moved) if moved else payload
