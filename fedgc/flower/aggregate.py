"""Weighted aggregation of decoded client updates, per payload type.

The result is, per parameter, a dense fp32 tensor in the model's shape. ``updates`` holds
(weight, payloads) per client, the weights summing to 1. Per payload type:

* dense, sparse: weighted sum, sparse ones scatter-added (no dense copy per client).
* ``VotePayload`` (signsgd, signum): weighted majority vote, the method's definition:
  sign(Σᵢ wᵢ·signᵢ) · Σᵢ wᵢ·scaleᵢ over the voting clients; a tie gives 0.
* ``LowRankPayload`` (powersgd): summed in factored form, Σᵢ wᵢ·PᵢQᵢᵀ = [w₁P₁ … w_KP_K]·[Q₁ … Q_K]ᵀ,
  one matrix product for all clients. (Data-parallel PowerSGD all-reduces P under a shared Q in a
  second exchange; a federated round has one upload, so each client sends its own P and Q.)
* every other payload (sign, ternary, QSGD, natural, STC): decoded to dense and summed.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch

from fedgc.compress.bits import unpack_bits
from fedgc.compress.payloads import DensePayload, LowRankPayload, Payload, SparsePayload, VotePayload, decompress


def majority_vote(votes: list[tuple[float, VotePayload]], numel: int) -> torch.Tensor:
    """sign(Σ wᵢ·signᵢ) · Σ wᵢ·scaleᵢ, flat."""
    tally = torch.zeros(numel, dtype=torch.float32)
    for weight, vote in votes:
        tally.add_(1.0 - 2.0 * unpack_bits(vote.signs, numel).to(torch.float32), alpha=weight)
    return torch.sign(tally) * sum(weight * vote.scale for weight, vote in votes)


def low_rank_sum(factors: list[tuple[float, LowRankPayload]]) -> torch.Tensor:
    """Σ wᵢ·PᵢQᵢᵀ as one product of the concatenated factors, flat."""
    p = torch.cat([weight * f.p.to(torch.float32) for weight, f in factors], dim=1)
    q = torch.cat([f.q.to(torch.float32) for _, f in factors], dim=1)
    return (p @ q.T).flatten()


def aggregate_payloads(updates: list[tuple[float, dict[str, Payload]]],
                       shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """``updates``: (weight, payloads) per client, weights summing to 1."""
    total = {name: torch.zeros(math.prod(shape), dtype=torch.float32) for name, shape in shapes.items()}
    votes: dict[str, list] = defaultdict(list)
    factors: dict[str, list] = defaultdict(list)
    for weight, payloads in updates:
        for name, payload in payloads.items():
            if isinstance(payload, SparsePayload):
                total[name].index_add_(0, payload.indices, payload.values.to(torch.float32) * weight)
            elif isinstance(payload, DensePayload):
                # Same arithmetic as the sparse path, so topk at density 1.0 == dense, bit for bit.
                total[name].add_(payload.values.to(torch.float32).flatten() * weight)
            elif isinstance(payload, VotePayload):
                votes[name].append((weight, payload))
            elif isinstance(payload, LowRankPayload):
                factors[name].append((weight, payload))
            else:
                total[name].add_(decompress(payload).flatten(), alpha=weight)
    for name, group in votes.items():
        total[name].add_(majority_vote(group, total[name].numel()))
    for name, group in factors.items():
        total[name].add_(low_rank_sum(group))
    return {name: total[name].reshape(shape) for name, shape in shapes.items()}
