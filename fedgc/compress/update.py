"""Compress a whole model update (one tensor per parameter name) with error feedback.

This is the plain function next to the state (the compressor and its memory), in the style of
PyTorch DDP comm hooks: ``compress_update(update, compressor, memory, ctx, ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedgc.compress.base import CompressionContext, Compressor, DensePayload, Payload
from fedgc.compress.config import CompressionConfig
from fedgc.compress.memory import Memory
from fedgc.compress.payloads import VALUE_DTYPES, to_value_dtype
from fedgc.compress.registry import COMPRESSORS


@dataclass
class CompressedUpdate:
    payloads: dict[str, Payload]
    # Dense fp32 view of what was sent, per parameter: what the server will add (before weighting).
    sent: dict[str, torch.Tensor]
    elements_sent: int
    elements_total: int
    # Global L2 norm of the update as trained (Δ) and as the compressor took it after its own
    # preparation (DGC's local clipping); equal for compressors that prepare nothing.
    norm_before_clip: float | None = None  # only with compress_update(..., norms=True)
    norm_after_clip: float | None = None


def build_compression(config: CompressionConfig) -> tuple[Compressor, Memory]:
    """The compressor named in the scenario and a fresh memory for one client."""
    cls = COMPRESSORS[config.name]
    return cls.from_config(config.options), cls.make_memory(config.options)


def _with_value_dtype(payload: Payload, dtype: torch.dtype) -> Payload:
    values = getattr(payload, "values", None)
    if values is None or values.dtype == dtype or not values.is_floating_point():
        return payload
    return type(payload)(**{**payload.__dict__, "values": to_value_dtype(values, dtype)})


def compress_update(
    update: dict[str, torch.Tensor],
    compressor: Compressor,
    memory: Memory,
    ctx: CompressionContext,
    *,
    dense_small_tensors: bool = True,
    value_dtype: str = "fp32",
    norms: bool = False,
) -> CompressedUpdate:
    """Compress every tensor of ``update``; the memory keeps exactly what was not sent.

    Invariant (tested): for every name, sent + new memory residual == compensated input.
    """
    dtype = VALUE_DTYPES[value_dtype]
    payloads: dict[str, Payload] = {}
    sent: dict[str, torch.Tensor] = {}
    elements_sent = elements_total = 0
    if ctx.memory is None:  # methods with state beyond error feedback (PowerSGD's Q) keep it here
        ctx.memory = memory
    norm_before = global_norm(update) if norms else None  # each a host sync on a GPU: only when asked
    update = compressor.prepare_update(update, ctx)
    norm_after = global_norm(update) if norms else None
    for name, tensor in update.items():
        compensated = memory.compensate(tensor.detach().to(torch.float32), name)
        if dense_small_tensors and tensor.dim() <= 1:
            payload: Payload = DensePayload(values=compensated.flatten().clone(), shape=tuple(tensor.shape))
        else:
            payload = compressor.compress(compensated, name, ctx)
        payload = _with_value_dtype(payload, dtype)
        dense_sent = compressor.decompress(payload).to(compensated.device)  # bits decode on the host
        memory.update(name, compensated, dense_sent)
        payloads[name] = payload
        sent[name] = dense_sent
        elements_total += tensor.numel()
        elements_sent += payload_elements(payload)
    return CompressedUpdate(payloads, sent, elements_sent, elements_total, norm_before, norm_after)


def global_norm(update: dict[str, torch.Tensor]) -> float:
    """The L2 norm of all tensors of ``update`` together (0.0 for an empty update)."""
    if not update:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t.detach().float())
                                                       for t in update.values()])))


def payload_elements(payload: Payload) -> int:
    """How many entries the payload carries (numel for dense, k for sparse)."""
    indices = getattr(payload, "indices", None)
    return int(indices.numel()) if indices is not None else int(torch.Size(payload.shape).numel())
