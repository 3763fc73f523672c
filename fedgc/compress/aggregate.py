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
from dataclasses import replace

import torch

from fedgc.compress.bits import unpack_bits
from fedgc.compress.payloads import DensePayload, LowRankPayload, Payload, SparsePayload, VotePayload, decompress


def majority_vote(votes: list[tuple[float, VotePayload]], numel: int, device: torch.device | None = None) -> torch.Tensor:
    """sign(Σ wᵢ·signᵢ) · Σ wᵢ·scaleᵢ, flat."""
    tally = torch.zeros(numel, dtype=torch.float32, device=device)
    for weight, vote in votes:
        tally.add_(1.0 - 2.0 * unpack_bits(vote.signs, numel).to(device=device, dtype=torch.float32), alpha=weight)
    return torch.sign(tally) * sum(weight * vote.scale for weight, vote in votes)


def low_rank_sum(factors: list[tuple[float, LowRankPayload]], device: torch.device | None = None) -> torch.Tensor:
    """Σ wᵢ·PᵢQᵢᵀ as one product of the concatenated factors, flat."""
    p = torch.cat([weight * f.p.to(device=device, dtype=torch.float32) for weight, f in factors], dim=1)
    q = torch.cat([f.q.to(device=device, dtype=torch.float32) for _, f in factors], dim=1)
    return (p @ q.T).flatten()


def aggregate_payloads(updates: list[tuple[float, dict[str, Payload]]],
                       shapes: dict[str, tuple[int, ...]],
                       scales: list[float] | None = None, device: torch.device | None = None) -> dict[str, torch.Tensor]:
    """``updates``: (weight, payloads) per client, weights summing to 1. ``scales``: per client, a
    factor ≤ 1 the server applies to the update itself (norm bounding): it multiplies the weight of
    every payload, except that a vote keeps its weight in the tally and has its scale multiplied.
    The sums are made on ``device`` (the server model's; default the CPU), each client's payload
    moved there as it is added: a sparse one as its k indices and values, never as a dense copy."""
    device = torch.device("cpu") if device is None else device
    total = {name: torch.zeros(math.prod(shape), dtype=torch.float32, device=device) for name, shape in shapes.items()}
    votes: dict[str, list[tuple[float, VotePayload]]] = defaultdict(list)
    factors: dict[str, list[tuple[float, LowRankPayload]]] = defaultdict(list)
    for i, (share, payloads) in enumerate(updates):
        scale = 1.0 if scales is None else scales[i]
        weight = share * scale
        for name, payload in payloads.items():
            if isinstance(payload, SparsePayload):
                total[name].index_add_(0, payload.indices.to(device),
                                       payload.values.to(device=device, dtype=torch.float32) * weight)
            elif isinstance(payload, DensePayload):
                # Same arithmetic as the sparse path, so topk at density 1.0 == dense, bit for bit.
                total[name].add_(payload.values.to(device=device, dtype=torch.float32).flatten() * weight)
            elif isinstance(payload, VotePayload):
                votes[name].append((share, payload if scale == 1.0 else replace(payload, scale=payload.scale * scale)))
            elif isinstance(payload, LowRankPayload):
                factors[name].append((weight, payload))
            else:
                total[name].add_(decompress(payload, device).flatten(), alpha=weight)
    for name, group in votes.items():
        total[name].add_(majority_vote(group, total[name].numel(), device))
    for name, pairs in factors.items():
        total[name].add_(low_rank_sum(pairs, device))
    return {name: total[name].reshape(shape) for name, shape in shapes.items()}


def capped_shares(num_examples: list[int], max_share: float) -> tuple[list[float], list[int]]:
    """FedAvg shares ``nᵢ / Σn``, no one above ``max_share``: a capped client gets ``max_share`` and the
    rest is shared by the others in proportion to their examples (repeated until no one is above).
    Returns the shares (summing to 1) and the positions capped. With nothing capped the shares are
    exactly ``nᵢ / Σn``, as without a cap. The cap is raised to 1/m when m·max_share < 1."""
    total = sum(num_examples)
    if total <= 0:
        raise ValueError("the updates' example counts sum to zero")
    shares = [n / total for n in num_examples]
    cap = max(max_share, 1.0 / len(num_examples))
    capped: set[int] = set()
    while True:
        over = {i for i, share in enumerate(shares) if i not in capped and share > cap}
        if not over:
            break
        capped |= over
        free = [i for i in range(len(shares)) if i not in capped]
        rest = sum(num_examples[i] for i in free)
        if rest <= 0:
            break
        left = 1.0 - cap * len(capped)
        shares = [cap if i in capped else num_examples[i] / rest * left for i in range(len(shares))]
    return shares, sorted(capped)


def norm_bounds(norms: list[float], factor: float) -> tuple[list[float], list[int]]:
    """Scale factors bounding each update's L2 norm by ``factor`` × the median norm, and the positions
    clipped. An update at or under the bound keeps the factor 1.0 exactly. A zero median bounds nothing."""
    ordered = sorted(norms)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    bound = factor * median
    if not bound > 0:  # most updates are empty (e.g. nothing passed a threshold): no scale to judge by
        return [1.0] * len(norms), []
    scales = [bound / norm if norm > bound else 1.0 for norm in norms]
    return scales, [i for i, s in enumerate(scales) if s < 1.0]


def coordinate_wise(updates: list[dict[str, Payload]], shapes: dict[str, tuple[int, ...]], scales: list[float],
                    rule: str, trim_fraction: float = 0.1, device: torch.device | None = None) -> dict[str, torch.Tensor]:
    """Per coordinate, the ``median`` or the ``trimmed_mean`` (the ⌊trim_fraction·m⌋ largest and smallest
    values dropped) of the m clients' dense updates, each first multiplied by its norm factor.
    Unweighted: one client, one value (so a claimed example count buys nothing). Holds m dense copies
    of one parameter at a time."""
    out = {}
    m = len(updates)
    for name, shape in shapes.items():
        stacked = torch.stack([decompress(p[name], device).flatten() * s for p, s in zip(updates, scales)])
        ordered = stacked.sort(dim=0).values
        if rule == "median":
            value = (ordered[(m - 1) // 2] + ordered[m // 2]) / 2
        elif rule == "trimmed_mean":
            cut = int(trim_fraction * m)
            value = ordered[cut : m - cut].mean(dim=0)
        else:
            raise ValueError(f"unknown aggregation rule {rule!r}")
        out[name] = value.reshape(shape)
    return out
