"""``stc``: Sparse Ternary Compression (Sattler et al., 2019).

Top-k (k = ceil(density · n)) by magnitude, then ternarized: every kept entry becomes ±μ with μ the
mean magnitude of the k kept entries. Sends a ``SparseTernaryPayload``: the k indices (delta + varint
or bitmap), one sign bit per kept entry and one fp32 μ. With error feedback (the method's default)
the residual keeps both the unsent entries and the ternarization error.
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, SparseTernaryPayload
from fedgc.compress.bits import pack_bits
from fedgc.compress.topk import k_for, topk_indices


class STC(Compressor):
    name = "stc"
    reads_density = True

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> SparseTernaryPayload:
        flat = tensor.detach().flatten().to(torch.float32)
        k = k_for(flat.numel(), ctx.density)
        indices = topk_indices(flat, k)
        values = flat[indices]
        return SparseTernaryPayload(indices=indices, signs=pack_bits(values < 0), scale=float(values.abs().mean()),
                                    shape=tuple(tensor.shape))
