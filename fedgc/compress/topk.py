"""``topk``: the ``k = ceil(density · n)`` entries of largest magnitude, exact (``torch.topk``).

Sends k indices (coded by the wire codec, delta + varint or bitmap) and k fp32/fp16 values.
Use it with error feedback so the unsent mass is not lost.
"""

from __future__ import annotations

import math

import torch

from fedgc.compress.base import CompressionContext, Compressor, SparsePayload


def k_for(numel: int, density: float) -> int:
    return max(1, min(numel, math.ceil(density * numel)))


class TopK(Compressor):
    name = "topk"

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> SparsePayload:
        flat = tensor.detach().flatten()
        k = k_for(flat.numel(), ctx.density)
        if k == flat.numel():
            indices = torch.arange(k, dtype=torch.int64)
        else:
            indices = torch.topk(flat.abs(), k, sorted=False).indices.sort().values
        return SparsePayload(indices=indices, values=flat[indices].to(torch.float32), shape=tuple(tensor.shape))
