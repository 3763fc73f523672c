"""``threshold``: every entry with |x| ≥ τ (``compression.threshold``), however many that is.

Sends the passing entries as indices (delta + varint or bitmap) and fp32/fp16 values; the number of
bits varies with the data (an update below τ everywhere costs a few bytes). Use with error feedback.
"""

from __future__ import annotations

from typing import cast

import torch
from pydantic import Field

from fedgc.compress.base import CompressionContext, Compressor, CompressorOptions, SparsePayload


class ThresholdOptions(CompressorOptions):
    """threshold's option."""

    threshold: float = Field(1e-3, gt=0.0, description="threshold: send entries with |x| >= threshold")


class Threshold(Compressor):
    name = "threshold"
    sparse_values = True
    Options = ThresholdOptions

    def __init__(self, threshold: float = 1e-3) -> None:
        self.threshold = threshold

    @classmethod
    def from_config(cls, options: CompressorOptions) -> Threshold:
        options = cast(ThresholdOptions, options)  # always an instance of cls.Options
        return cls(threshold=options.threshold)

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> SparsePayload:
        flat = tensor.detach().flatten().to(torch.float32)
        indices = (flat.abs() >= self.threshold).nonzero().view(-1)
        return SparsePayload(indices=indices, values=flat[indices], shape=tuple(tensor.shape))
