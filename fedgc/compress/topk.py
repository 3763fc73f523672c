"""``topk``: the ``k = ceil(density · n)`` entries of largest magnitude, exact.

``density`` is the round's density the server sends (``config.density``, after any warm-up), not a
client setting. Ties are broken by index: entries of equal magnitude at the k-th place are taken
lowest index first, so the selection is a function of the values alone (``torch.topk`` leaves that
choice unspecified; any client in any language reproduces this rule). NaN ranks above every number.
Sends k indices (coded by the wire codec, delta + varint or bitmap) and k fp32/fp16 values.
Use it with error feedback so the unsent mass is not lost.
"""

from __future__ import annotations

import math

import torch

from fedgc.compress.base import CompressionContext, Compressor, SparsePayload


def k_for(numel: int, density: float) -> int:
    return max(1, min(numel, math.ceil(density * numel)))


def on_host(*tensors: torch.Tensor) -> bool:
    """Whether numpy may stand in for torch on ``tensors`` (CPU fp32 or fp64) in exact operations:
    abs, comparisons, nonzero, gathers, partition; its boolean kernels and ``flatnonzero`` cost a
    fraction of torch's on a few hundred thousand entries."""
    return all(t.is_cpu and t.dtype in (torch.float32, torch.float64) for t in tensors)


def topk_indices(flat: torch.Tensor, k: int) -> torch.Tensor:
    """Ascending indices of the ``k`` entries of ``flat`` of largest magnitude; ties at the k-th
    magnitude go to the lowest indices, NaN ranks above every number."""
    if k >= flat.numel():
        return torch.arange(flat.numel(), dtype=torch.int64, device=flat.device)
    keys = torch.nan_to_num(flat.abs(), nan=math.inf, posinf=math.inf)
    kth = torch.topk(keys, k, sorted=False).values.min()
    above = torch.nonzero(keys > kth).flatten()
    at = torch.nonzero(keys == kth).flatten()[: k - above.numel()]  # nonzero lists indices ascending
    return torch.cat([above, at]).sort().values


class TopK(Compressor):
    name = "topk"
    sparse_values = True
    reads_density = True

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> SparsePayload:
        flat = tensor.detach().flatten()
        indices = topk_indices(flat, k_for(flat.numel(), ctx.density))
        return SparsePayload(indices=indices, values=flat[indices].to(torch.float32), shape=tuple(tensor.shape))
