"""Compress a whole model update (one tensor per parameter name) with error feedback.

This is the plain function next to the state (the compressor and its memory), in the style of
PyTorch DDP comm hooks: ``compress_update(update, compressor, memory, ctx, ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedgc.compress.base import V3_VALUE_DTYPES, CompressionContext, Compressor, DensePayload, Payload, SparsePayload
from fedgc.compress.config import CompressionConfig
from fedgc.compress.memory import Memory
from fedgc.compress.payloads import VALUE_DTYPES, CodedSparsePayload, to_value_dtype
from fedgc.compress.quantize import encode_values
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


def _with_value_dtype(payload: Payload, value_dtype: str) -> Payload:
    """``payload`` with its values as ``value_dtype`` sends them: fp32 or fp16 values in place; for a
    v3 encoding (int8, int4, sign) a sparse payload becomes a ``CodedSparsePayload`` whose ``values``
    are what the receiver decodes (``fedgc.compress.quantize.quantize``), and a dense payload's values
    (biases, norms) go fp16, the narrowest dense values the wire has."""
    values = getattr(payload, "values", None)
    if value_dtype in V3_VALUE_DTYPES:
        if type(payload) is DensePayload:
            return _with_value_dtype(payload, "fp16")
        if type(payload) is not SparsePayload:  # a coded one already, other kinds
            return payload
        coded = encode_values(payload.values, value_dtype)
        return CodedSparsePayload(indices=payload.indices, values=coded.dequantized, shape=payload.shape,
                                  encoding=value_dtype, block=coded.block, codes=coded.codes, scales=coded.scales)
    dtype = VALUE_DTYPES[value_dtype]
    if values is None or values.dtype == dtype or not values.is_floating_point():
        return payload
    return type(payload)(**{**payload.__dict__, "values": to_value_dtype(values, dtype)})


def check_sparse(payload: SparsePayload, tensor: torch.Tensor, compressor: Compressor, name: str) -> None:
    """ValueError (one line naming the compressor) unless ``payload`` keeps ``SparsePayload``'s rules
    for ``tensor``: shape the tensor's; indices 1-D integer, strictly increasing, in [0, numel); values
    1-D floating, one per index. (Unsorted indices would otherwise reach the server sorted by the
    bitmap encoding with their values in the order sent: applied to the wrong entries, silently.)"""
    where = f"compressor {compressor.name!r} returned a SparsePayload for {name!r}"
    indices, values = payload.indices, payload.values
    if not isinstance(indices, torch.Tensor) or not isinstance(values, torch.Tensor):
        raise ValueError(f"{where} whose indices or values are not tensors")
    if tuple(payload.shape) != tuple(tensor.shape):
        raise ValueError(f"{where} of shape {tuple(payload.shape)!r:.60}, not the tensor's {tuple(tensor.shape)}")
    if indices.dim() != 1 or indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
        raise ValueError(f"{where} whose indices are not a 1-D integer tensor ({indices.dtype}, {indices.dim()}-D)")
    if values.dim() != 1 or not values.is_floating_point() or values.numel() != indices.numel():
        raise ValueError(f"{where} whose values are not a 1-D floating tensor of one value per index "
                         f"({values.dtype}, {values.dim()}-D, {values.numel()} values for {indices.numel()} indices)")
    if indices.numel() == 0:
        return
    # On the CPU numpy reads the indices: the same tests in a fraction of torch's calls' time.
    order = indices.detach().numpy() if indices.device.type == "cpu" else indices
    if bool((order[1:] <= order[:-1]).any()):
        raise ValueError(f"{where} whose indices are not strictly increasing (sort them, values with them)")
    if int(order[0]) < 0 or int(order[-1]) >= tensor.numel():
        raise ValueError(f"{where} with an index outside [0, {tensor.numel()})")


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

    ``value_dtype``: fp32 or fp16 (wire format version 1), or int8, int4 or sign (sparse values in
    wire format v3, ``fedgc.flower.update_record.encode_update`` picks the version): what the
    receiver decodes is what ``sent`` holds, so the memory keeps the rounding too.
    A ``SparsePayload`` the compressor returns is checked first (``check_sparse``).

    Invariant (tested): for every name, sent + new memory residual == compensated input.
    """
    if value_dtype not in VALUE_DTYPES and value_dtype not in V3_VALUE_DTYPES:
        raise ValueError(f"value_dtype {value_dtype!r}: one of {', '.join([*VALUE_DTYPES, *V3_VALUE_DTYPES])}")
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
            if isinstance(payload, SparsePayload):
                check_sparse(payload, tensor, compressor, name)
        payload = _with_value_dtype(payload, value_dtype)
        dense_sent = compressor.decompress(payload).to(compensated.device)  # bits decode on the host
        memory.update_in_place(name, compensated, dense_sent)  # compensated is not read after this
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
