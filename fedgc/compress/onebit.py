"""``onebit``: 1-bit SGD (Seide et al., 2014) with error feedback.

Each element is quantized to one bit: non-negative entries are reconstructed as the mean of the
non-negative entries, negative ones as the mean of the negative entries. Sends ``SignPayload``:
1 bit/element + two fp32 reconstruction values per tensor. The quantization error is carried to
the next round by the residual memory (``compression.error_feedback: true``, the method's premise).
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, SignPayload
from fedgc.compress.bits import pack_bits


def _mean(values: torch.Tensor) -> float:
    return float(values.mean()) if values.numel() else 0.0


class OneBit(Compressor):
    name = "onebit"

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> SignPayload:
        flat = tensor.detach().flatten().to(torch.float32)
        negative = flat < 0
        return SignPayload(signs=pack_bits(negative), pos_scale=_mean(flat[~negative]),
                           neg_scale=abs(_mean(flat[negative])), shape=tuple(tensor.shape))
