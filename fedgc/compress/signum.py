"""``signum``: signSGD with momentum and majority vote (Bernstein et al., 2018).

The client keeps a momentum m ← β·m + (1 − β)·g (β = ``compression.signum_momentum``) in its memory
state and sends sign(m) as a ``VotePayload``: 1 bit/element + one fp32 scale ‖m‖₁/n. The server
takes the weighted majority vote, as for ``signsgd``.
"""

from __future__ import annotations

from typing import cast

import torch
from pydantic import Field

from fedgc.compress.base import CompressionContext, Compressor, CompressorOptions, VotePayload
from fedgc.compress.method_memory import SignumMemory
from fedgc.compress.signsgd import vote


class SignumOptions(CompressorOptions):
    """signum's option."""

    signum_momentum: float = Field(0.9, ge=0.0, lt=1.0, description="signum: m <- beta*m + (1-beta)*g")


class Signum(Compressor):
    name = "signum"
    Options = SignumOptions

    @classmethod
    def make_memory(cls, options: CompressorOptions) -> SignumMemory:
        options = cast(SignumOptions, options)  # always an instance of cls.Options
        return SignumMemory(beta=options.signum_momentum, error_feedback=options.error_feedback)

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> VotePayload:
        return vote(tensor)
