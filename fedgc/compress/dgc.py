"""``dgc``: Deep Gradient Compression (Lin et al., ICLR 2018, arXiv 1712.01887).

The pieces, each as in the paper: momentum correction and momentum factor masking live in
``DGCMemory`` (``dgc_memory.py``); local gradient clipping with the threshold scaled by N^-1/2 is
``prepare_update``; the warm-up schedule is ``warmup.warmup_density`` (the server puts the round's
density into ``ctx.density``); the top-k selection below estimates its threshold on a sample.
See docs/dgc.md for the equations of the data-parallel and the federated mode.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, cast

import numpy as np
import torch
from pydantic import Field

from fedgc.compress.base import CompressionContext, Compressor, CompressorOptions, SparsePayload
from fedgc.compress.dgc_memory import DGCMemory
from fedgc.compress.randomness import generator_on
from fedgc.compress.topk import k_for, on_host, topk_indices

MIN_SAMPLES = 1_000  # fewest entries sampled to estimate the threshold; tensors this small use exact top-k
LOWER_RATIO = 0.8  # fewer than LOWER_RATIO·k candidates: lower the threshold and count again
THRESHOLD_DECAY = 0.8  # factor applied to the threshold on each lowering
MAX_LOWERINGS = 10  # bound on the extra passes; afterwards the candidates found so far are sent
# Entries per slice of the threshold pass. A slice's |x| (16 MB) stays under glibc's 32 MB mmap
# ceiling, so it is reused instead of page-faulted in afresh as a full-size |x| would be; few slices
# keep the number of thread barriers low on a loaded machine.
CHUNK = 1 << 22
# The smallest positive value of each dtype (a subnormal): ``|x| >=`` it is ``x != 0``.
_SMALLEST = {dtype: float(torch.nextafter(torch.tensor(0.0, dtype=dtype), torch.tensor(1.0, dtype=dtype)))
             for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}


def indices_at_or_above(flat: torch.Tensor, threshold: float | torch.Tensor) -> torch.Tensor:
    """Sorted int64 indices of the entries with ``|x| >= threshold`` (``x != 0`` when it is 0).

    One pass over ``flat`` filling a single boolean mask slice by slice (on CPU no full-size |x| is
    materialized), then one ``nonzero`` over the mask. A tensor ``threshold`` (0-d, on ``flat``'s
    device) is never read back to the host: the "0 means nonzero" rule becomes ``|x| >=`` the smallest
    positive float, which is the same set. A float threshold on a CPU fp32/fp64 tensor takes numpy's
    way (``_host_indices_at_or_above``): the same set, for a fraction of torch's cost.
    """
    if not isinstance(threshold, torch.Tensor) and on_host(flat):
        return _host_indices_at_or_above(flat.detach().numpy(), threshold)
    step = flat.numel() if flat.is_cuda else CHUNK  # slicing only pays off for CPU memory
    mask = torch.empty(flat.numel(), dtype=torch.bool, device=flat.device)
    if isinstance(threshold, torch.Tensor):
        bound = threshold.to(flat.dtype).clamp_min(_SMALLEST[flat.dtype])
        # torch leaves Tensor.split unannotated (no-untyped-call)
        for chunk, chunk_mask in zip(flat.split(step), mask.split(step)):  # type: ignore[no-untyped-call]
            torch.ge(chunk.abs(), bound, out=chunk_mask)
        return mask.nonzero().view(-1)
    # torch leaves Tensor.split unannotated (no-untyped-call)
    for chunk, chunk_mask in zip(flat.split(step), mask.split(step)):  # type: ignore[no-untyped-call]
        if threshold > 0:
            torch.ge(chunk.abs(), threshold, out=chunk_mask)
        else:
            torch.ne(chunk, 0, out=chunk_mask)
    return mask.nonzero().view(-1)


def _host_indices_at_or_above(x: np.ndarray, threshold: float) -> torch.Tensor:
    """``indices_at_or_above`` for a CPU tensor's array: torch's comparisons (the threshold rounded to
    the array's dtype, as torch rounds a Python scalar, overflowing to inf) and ``nonzero``, done by
    numpy, whose boolean kernels and ``flatnonzero`` cost a fraction of torch's at these sizes."""
    mask = np.empty(x.size, dtype=np.bool_)
    with np.errstate(over="ignore"):
        bound = x.dtype.type(threshold)
    for start in range(0, x.size, CHUNK):
        chunk, chunk_mask = x[start:start + CHUNK], mask[start:start + CHUNK]
        if threshold > 0:
            np.greater_equal(np.abs(chunk), bound, out=chunk_mask)
        else:
            np.not_equal(chunk, 0, out=chunk_mask)
    return torch.from_numpy(np.flatnonzero(mask))


def sampled_topk_indices(
    flat: torch.Tensor, k: int, sample_ratio: float, generator: torch.Generator, *, device_threshold: bool = False
) -> tuple[torch.Tensor, int]:
    """Indices (sorted, int64) of about the k largest ``|flat|`` and the number of threshold passes.

    The threshold is the magnitude ranked ⌈s·k/n⌉ in a random sample of s = sample_ratio·n entries
    (at least MIN_SAMPLES). If more than k entries pass, the k largest of them are kept (they include
    every entry above the true k-th magnitude, so that is the exact top-k); if fewer than 0.8·k pass,
    the threshold is lowered by 0.8 and the pass repeated. The result has at most k entries, at least
    0.8·k unless the lowerings run out, each at least as large in magnitude as every entry left out.

    On a GPU (or with ``device_threshold``) the positions are drawn with a generator on the device
    (``fedgc.compress.randomness.generator_on``) and the threshold stays a device tensor: no host synchronisation but the
    pass's own count. On the CPU (fp32, fp64) numpy takes the sample's threshold, the passes and the
    trim's bookkeeping: exact operations, the same result, a fraction of torch's cost per call.
    """
    numel = flat.numel()
    if k >= numel:
        return torch.arange(numel, dtype=torch.int64, device=flat.device), 0
    num_samples = min(numel, max(MIN_SAMPLES, math.ceil(sample_ratio * numel)))
    if num_samples >= numel:  # exact top-k (sample_ratio = 1.0 or a small tensor)
        return topk_indices(flat, k), 1
    picks = torch.randint(numel, (num_samples,), generator=generator_on(generator, flat.device), device=flat.device)
    top_in_sample = max(1, math.ceil(num_samples * k / numel))
    threshold: float | torch.Tensor
    passing: Callable[[Any], torch.Tensor]  # the pass at a threshold: a float on the host
    host = on_host(flat) and not device_threshold  # numpy's way: the same numbers in fewer, cheaper calls
    if host:  # the magnitude ranked top_in_sample (NaN if the sample holds one, as topk's values' min)
        x = flat.detach().numpy()
        sample = np.abs(x[picks.numpy()])
        sample.partition(num_samples - top_in_sample)
        threshold = float(sample[num_samples - top_in_sample:].min())
        passing = partial(_host_indices_at_or_above, x)
    else:
        threshold = flat[picks].abs().topk(top_in_sample, sorted=False).values.min()
        if not (device_threshold or flat.is_cuda):
            threshold = float(threshold)  # on the CPU: today's arithmetic, bit for bit
        passing = partial(indices_at_or_above, flat)
    # The one host read of a pass is its count (``nonzero``'s size), which the baseline pass has too.
    candidates = passing(threshold)
    passes = 1
    while candidates.numel() < LOWER_RATIO * k and passes <= MAX_LOWERINGS and threshold > 0:
        threshold = threshold * THRESHOLD_DECAY
        candidates = passing(threshold)
        passes += 1
    excess = candidates.numel() - k
    if excess > 0:  # drop the `excess` smallest candidates (torch's topk picks among ties); the rest stays sorted
        if host:
            kept = candidates.numpy()
            drop = torch.from_numpy(np.abs(x[kept])).topk(excess, largest=False, sorted=False).indices
            return torch.from_numpy(np.delete(kept, drop.numpy())), passes
        drop = flat[candidates].abs().topk(excess, largest=False, sorted=False).indices
        keep = torch.ones(candidates.numel(), dtype=torch.bool, device=flat.device)
        keep[drop] = False
        candidates = candidates[keep]
    return candidates, passes


def clip_update(update: dict[str, torch.Tensor], max_norm: float) -> dict[str, torch.Tensor]:
    """Scale the whole update so its global L2 norm is at most ``max_norm`` (as clip_grad_norm_)."""
    total_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t) for t in update.values()]))
    coef = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
    return {name: t * coef for name, t in update.items()}


class DGCOptions(CompressorOptions):
    """DGC (Lin et al., 2018; docs/dgc.md). DGC always keeps its residual: it ignores ``error_feedback``."""

    momentum: float = Field(0.9, ge=0.0, lt=1.0, description="DGC momentum m in u <- m*u + g")
    nesterov: bool = Field(False, description="Nesterov momentum: u <- m*(u + g); v <- v + u + g")
    momentum_correction: bool = Field(True, description="accumulate momentum u into v (off: v <- v + g)")
    momentum_masking: bool = Field(True, description="zero the momentum u where entries were sent")
    clip_norm: float | None = Field(None, gt=0.0, description="local gradient clipping threshold before N^-1/2 scaling")
    momentum_dtype: Literal["fp32", "bf16"] = Field(
        "fp32", description="how DGC stores its momentum u between rounds (bf16: 2 B/param less per client, "
                            "a documented precision trade-off; v stays fp32, nothing is lost)")
    sample_ratio: float = Field(0.01, gt=0.0, le=1.0, description="fraction of |v| sampled to estimate the top-k threshold")


class DGC(Compressor):
    name = "dgc"
    sparse_values = True
    reads_density = True
    Options = DGCOptions
    reads_error_feedback = False  # DGC's memory always keeps the residual

    def __init__(self, sample_ratio: float = 0.01, clip_norm: float | None = None) -> None:
        self.sample_ratio = sample_ratio
        self.clip_norm = clip_norm

    @classmethod
    def from_config(cls, options: CompressorOptions) -> DGC:
        options = cast(DGCOptions, options)  # always an instance of cls.Options
        return cls(sample_ratio=options.sample_ratio, clip_norm=options.clip_norm)

    @classmethod
    def make_memory(cls, options: CompressorOptions) -> DGCMemory:
        options = cast(DGCOptions, options)  # always an instance of cls.Options
        return DGCMemory(
            momentum=options.momentum,
            nesterov=options.nesterov,
            momentum_correction=options.momentum_correction,
            momentum_masking=options.momentum_masking,
            dense_small_tensors=options.dense_small_tensors,
            momentum_dtype=torch.bfloat16 if options.momentum_dtype == "bf16" else torch.float32,
        )

    def prepare_update(self, update: dict[str, torch.Tensor], ctx: CompressionContext) -> dict[str, torch.Tensor]:
        # Local gradient clipping before accumulation. Summing N clients' clipped gradients grows
        # their norm by about sqrt(N), hence the N^-1/2 scaling of the threshold (paper §3.2).
        if self.clip_norm is None or not update:
            return update
        return clip_update(update, self.clip_norm / math.sqrt(max(1, ctx.num_clients)))

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> SparsePayload:
        flat = tensor.detach().flatten()
        k = k_for(flat.numel(), ctx.density)
        # Never the global RNG: without a generator in the context, sampling is seeded by the round.
        generator = ctx.generator if ctx.generator is not None else torch.Generator().manual_seed(ctx.round)
        indices, _ = sampled_topk_indices(flat, k, self.sample_ratio, generator)
        return SparsePayload(indices=indices, values=flat[indices].to(torch.float32), shape=tuple(tensor.shape))
