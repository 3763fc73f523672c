"""``powersgd``: PowerSGD (Vogels et al., 2019), rank r, warm-started Q, error feedback.

The tensor is viewed as M (rows = shape[0], cols = the rest). One power iteration from the previous
round's Q: P = orthonormalize(M·Q), Q ← Mᵀ·P; sent = P·Qᵀ. Sends a ``LowRankPayload`` (P and Q in
fp32 or fp16: 32·r·(rows + cols)/(rows·cols) bits/element). Q persists in ``PowerSGDMemory`` (the
memory must be in ``ctx.memory``; without it each call starts from a fresh Gaussian Q). The server
sums factor products in one matrix product (fedgc.compress.aggregate). When the factors would not be
smaller than the tensor it is sent dense.
"""

from __future__ import annotations

from typing import cast

import torch
from pydantic import Field

from fedgc.compress.base import CompressionContext, Compressor, CompressorOptions, DensePayload, LowRankPayload, Payload
from fedgc.compress.method_memory import PowerSGDMemory
from fedgc.compress.payloads import VALUE_DTYPES, to_value_dtype
from fedgc.compress.randomness import generator_on


class PowerSGDOptions(CompressorOptions):
    """powersgd's option."""

    powersgd_rank: int = Field(2, ge=1, le=1024, description="powersgd: rank r of the P·Qᵀ approximation")


class PowerSGD(Compressor):
    name = "powersgd"
    Options = PowerSGDOptions

    def __init__(self, rank: int = 2, factor_dtype: torch.dtype = torch.float32) -> None:
        self.rank, self.factor_dtype = rank, factor_dtype

    @classmethod
    def from_config(cls, options: CompressorOptions) -> PowerSGD:
        options = cast(PowerSGDOptions, options)  # always an instance of cls.Options
        return cls(rank=options.powersgd_rank, factor_dtype=VALUE_DTYPES[options.value_dtype])

    @classmethod
    def make_memory(cls, options: CompressorOptions) -> PowerSGDMemory:
        options = cast(PowerSGDOptions, options)  # always an instance of cls.Options
        return PowerSGDMemory(error_feedback=options.error_feedback)

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> Payload:
        shape = tuple(tensor.shape)
        rows = shape[0] if shape else 1
        matrix = tensor.detach().to(torch.float32).reshape(rows, -1)
        cols = matrix.shape[1]
        rank = min(self.rank, rows, cols)
        if rank * (rows + cols) >= rows * cols:
            return DensePayload(values=matrix.flatten().clone(), shape=shape)
        memory = ctx.memory if isinstance(ctx.memory, PowerSGDMemory) else None
        q = memory.qs.get(name) if memory is not None else None
        if q is None or q.shape != (cols, rank) or not bool(q.abs().sum() > 0):
            q = torch.randn(cols, rank, generator=generator_on(ctx.generator, matrix.device), device=matrix.device)
        p = to_value_dtype(torch.linalg.qr(matrix @ q).Q, self.factor_dtype)
        q = to_value_dtype(matrix.T @ p.to(torch.float32), self.factor_dtype)  # fp16: saturated, not ±Inf
        if memory is not None:
            memory.qs[name] = q.to(torch.float32).clone()
        return LowRankPayload(p=p, q=q, shape=shape)
