"""``none``: the dense fp32 tensor, 32 bits per element. The baseline every ratio is measured against."""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, DensePayload


class NoCompression(Compressor):
    name = "none"

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> DensePayload:
        return DensePayload(values=tensor.detach().to(torch.float32).flatten().clone(), shape=tuple(tensor.shape))
