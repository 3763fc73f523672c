"""``terngrad``: TernGrad (Wen et al., 2017), stochastic ternarization, unbiased.

With s = max|x| per tensor, each entry becomes s·sign(x)·b with b ~ Bernoulli(|x|/s) drawn from
``ctx.generator``, so E = x. Sends a ``TernaryPayload``: codes packed five per byte in base 3
(1.6 bits/element) + one fp32 scale. (The paper's optional 2.5σ gradient clipping is not applied.)
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, TernaryPayload
from fedgc.compress.bits import pack_trits
from fedgc.compress.randomness import generator_on


class TernGrad(Compressor):
    name = "terngrad"

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> TernaryPayload:
        flat = tensor.detach().flatten().to(torch.float32)
        scale = float(flat.abs().max()) if flat.numel() else 0.0
        keep = torch.rand(flat.shape, generator=generator_on(ctx.generator, flat.device), device=flat.device) * scale < flat.abs()
        codes = torch.where(keep, torch.where(flat < 0, 2, 1), 0)
        return TernaryPayload(trits=pack_trits(codes), scale=scale, shape=tuple(tensor.shape))
