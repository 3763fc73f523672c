"""``natural``: natural compression (Horváth et al., 2019), stochastic rounding to a power of two.

|x| in [2^e, 2^(e+1)) becomes 2^(e+1) with probability |x|/2^e − 1, else 2^e: unbiased. On fp32 bits
this is: keep the sign and exponent, round up the exponent with probability mantissa/2^23 (which
also rounds subnormals to 0 or 2^−126, unbiasedly). Sends a ``NaturalPayload``: 8-bit exponent + 1
sign bit = 9 bits/element. |x| ≥ 2^127 rounds down to 2^127 (the only biased case; 2^128 is inf).
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, NaturalPayload
from fedgc.compress.bits import pack_bits
from fedgc.compress.randomness import generator_on


class Natural(Compressor):
    name = "natural"

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> NaturalPayload:
        bits = tensor.detach().flatten().to(torch.float32).contiguous().view(torch.int32)
        exponent = (bits >> 23) & 0xFF
        mantissa = (bits & 0x7FFFFF).to(torch.float64) / 2**23
        up = torch.rand(bits.shape, generator=generator_on(ctx.generator, bits.device), dtype=torch.float64,
                        device=bits.device) < mantissa
        exponent = (exponent + up.to(torch.int32)).clamp(max=254)
        return NaturalPayload(exponents=exponent.to(torch.uint8), signs=pack_bits(bits < 0),
                              shape=tuple(tensor.shape))
