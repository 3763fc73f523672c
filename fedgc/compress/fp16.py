"""``fp16``: the dense tensor in IEEE half precision, 16 bits per element (2× smaller than ``none``).

Sends ``HalfPayload`` (all values fp16, whatever ``value_dtype`` says). Values beyond ±65504 become
±65504 rather than infinity. With error feedback the rounding error is carried to the next round.
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, HalfPayload
from fedgc.compress.payloads import FP16_MAX


class Fp16(Compressor):
    name = "fp16"

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> HalfPayload:
        values = tensor.detach().flatten().clamp(-FP16_MAX, FP16_MAX)
        return HalfPayload(values=values, shape=tuple(tensor.shape))
