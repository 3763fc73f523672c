"""``signsgd``: signSGD with majority vote (Bernstein et al., 2018).

Sends one sign bit per element (``VotePayload``, bit-packed: 1 bit/element) and one fp32 scale, the
mean magnitude ‖x‖₁/n, so the server step has the update's size (with ``server_lr`` 1). The server
aggregates by weighted majority vote: sign(Σ wᵢ·signᵢ) · Σ wᵢ·scaleᵢ (fedgc.compress.aggregate).
Zero entries count as positive.
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext, Compressor, VotePayload
from fedgc.compress.bits import pack_bits


def vote(tensor: torch.Tensor) -> VotePayload:
    flat = tensor.detach().flatten().to(torch.float32)
    scale = float(flat.abs().mean()) if flat.numel() else 0.0
    return VotePayload(signs=pack_bits(flat < 0), scale=scale, shape=tuple(tensor.shape))


class SignSGD(Compressor):
    name = "signsgd"

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> VotePayload:
        return vote(tensor)
