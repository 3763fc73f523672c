"""``efsignsgd``: EF-SignSGD (Karimireddy et al., 2019): scaled sign with error feedback.

Sends one sign bit per element and one fp32 scale ‖x‖₁/n (``SignPayload`` with equal positive and
negative scales): 1 bit/element + 32 bits per tensor. The server decodes and averages (no vote).
Error feedback is what makes the method converge; keep ``compression.error_feedback: true``.
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, SignPayload
from fedgc.compress.bits import pack_bits


class EFSignSGD(Compressor):
    name = "efsignsgd"

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> SignPayload:
        flat = tensor.detach().flatten().to(torch.float32)
        scale = float(flat.abs().mean()) if flat.numel() else 0.0
        return SignPayload(signs=pack_bits(flat < 0), pos_scale=scale, neg_scale=scale, shape=tuple(tensor.shape))
