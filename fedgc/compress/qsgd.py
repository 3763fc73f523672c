"""``qsgd``: QSGD (Alistarh et al., 2017), s levels, stochastic rounding, unbiased.

Per bucket of d entries (``qsgd_bucket_size``) the L2 norm ‖v‖ is sent (fp32); each entry becomes a
level l ∈ [−s, s] with |l| = ⌊s·|x|/‖v‖ + u⌋, u ~ U[0, 1) from ``ctx.generator``, so E[‖v‖·l/s] = x.
Levels travel as l + s in bit_length(2s) bits: with s = 15, 5 bits/element + 32/d for the norms.
"""

from __future__ import annotations

from typing import cast

import torch
from pydantic import Field

from fedgc.compress.base import CompressionContext, Compressor, CompressorOptions, QuantizedPayload
from fedgc.compress.bits import pack_uint
from fedgc.compress.randomness import generator_on


class QSGDOptions(CompressorOptions):
    """qsgd's options."""

    qsgd_levels: int = Field(15, ge=1, le=32767, description="qsgd: quantization levels s per sign")
    qsgd_bucket_size: int = Field(512, ge=1, description="qsgd: entries sharing one L2 norm")


class QSGD(Compressor):
    name = "qsgd"
    Options = QSGDOptions

    def __init__(self, levels: int = 15, bucket_size: int = 512) -> None:
        self.levels, self.bucket_size = levels, bucket_size

    @classmethod
    def from_config(cls, options: CompressorOptions) -> QSGD:
        options = cast(QSGDOptions, options)  # always an instance of cls.Options
        return cls(levels=options.qsgd_levels, bucket_size=options.qsgd_bucket_size)

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> QuantizedPayload:
        flat = tensor.detach().flatten().to(torch.float32)
        n, d, s = flat.numel(), self.bucket_size, self.levels
        buckets = torch.zeros(-(-n // d) * d, device=flat.device)
        buckets[:n] = flat
        buckets = buckets.view(-1, d)
        norms = torch.linalg.vector_norm(buckets, dim=1)
        ratio = buckets.abs() / norms.clamp_min(torch.finfo(torch.float32).tiny)[:, None]
        noise = torch.rand(buckets.shape, generator=generator_on(ctx.generator, flat.device), device=flat.device)
        magnitude = torch.floor(ratio * s + noise).clamp(0, s)
        level = torch.where(buckets < 0, -magnitude, magnitude).flatten()[:n].to(torch.int64)
        return QuantizedPayload(codes=pack_uint(level + s, (2 * s).bit_length()), norms=norms,
                                levels=s, bucket_size=d, shape=tuple(tensor.shape))
