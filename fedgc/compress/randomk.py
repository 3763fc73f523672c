"""``randomk``: k = ceil(density · n) entries chosen uniformly at random (``ctx.generator``).

Sends k indices (delta + varint or bitmap) and k fp32/fp16 values. Without error feedback the values
are scaled by n/k, so the update is unbiased (E[decompress] = input); with error feedback they are
sent unscaled (the contractive form of Stich et al., 2018), since the residual keeps the rest.
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, CompressorOptions, SparsePayload
from fedgc.compress.randomness import generator_on
from fedgc.compress.topk import k_for


class RandomK(Compressor):
    name = "randomk"
    sparse_values = True
    reads_density = True

    def __init__(self, unbiased: bool = True) -> None:
        self.unbiased = unbiased

    @classmethod
    def from_config(cls, options: CompressorOptions) -> RandomK:
        return cls(unbiased=not options.error_feedback)

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> SparsePayload:
        flat = tensor.detach().flatten().to(torch.float32)
        n = flat.numel()
        k = k_for(n, ctx.density)
        indices = torch.randperm(n, generator=generator_on(ctx.generator, flat.device), device=flat.device)[:k].sort().values
        values = flat[indices] * (n / k) if self.unbiased else flat[indices]
        return SparsePayload(indices=indices, values=values, shape=tuple(tensor.shape))
