"""Value encodings of wire format v3 (docs/wire-format.md, "Format v3"): what a sparse payload's
kept values become on the wire, and what the receiver rebuilds from them. Here, beside the payloads,
because the compressor side quantizes (``value_dtype`` int8, int4, sign in ``compress_update``, for
error feedback) and ``fedgc.compress`` imports nothing of the wire; the codec reads it as
``fedgc.wire.quantize``.

* ``fp32``, ``fp16``: the values themselves (fp16 saturated at ±65504, as ``value_dtype: fp16``).
* ``int8``, ``int4``: symmetric integers ``c`` in ``−L…L`` (``L`` = 127, 7) and one f32 ``scale`` per
  block of ``B`` values; the receiver sees ``c · scale`` (one f32 product).
* ``sign``: one sign bit per value and one f32 ``scale`` per block, the mean magnitude of the block
  (sparse ternary compression's "sign and mean"); the receiver sees ``±scale``.

``quantize(values, encoding, block)`` is the compressor side's half of error feedback: it returns
exactly what the receiver will decode, so the residual can keep ``values − quantize(values)``.
Arithmetic is fixed so that another language can produce the same bytes: per block, ``m`` = the
largest ``|v|`` (f32), ``scale = m / L`` in f32, ``c = round_half_even(v / scale)`` in f32 clamped to
``±L`` (all zero when ``scale`` is 0); for ``sign``, the ``|v|`` summed in f64 one after the other
in index order, divided by the block's length in f64, rounded once to f32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

FP16_MAX = 65504.0
ENCODINGS = ("fp32", "fp16", "int8", "int4", "sign")  # the wire code of each is its position
ENCODING_CODES = {name: code for code, name in enumerate(ENCODINGS)}
LEVELS = {"int8": 127, "int4": 7}
SCALED = ("int8", "int4", "sign")  # the encodings with a scale per block


def value_bits(encoding: str) -> int:
    """Bits per value on the wire, scales not counted."""
    return {"fp32": 32, "fp16": 16, "int8": 8, "int4": 4, "sign": 1}[encoding]


def code_bytes(encoding: str, count: int) -> int:
    """Bytes of ``count`` values' codes (int4: two per byte, sign: eight per byte)."""
    return -(-count * value_bits(encoding) // 8)


def block_count(count: int, block: int) -> int:
    """Scales for ``count`` values in blocks of ``block`` (0: one block for the whole tensor). A block
    longer than the values is one block, so nothing is ever sized by ``block``."""
    if count == 0:
        return 0
    return 1 if block == 0 or block >= count else -(-count // block)


@dataclass(frozen=True)
class Coded:
    """Values as the wire holds them: ``codes`` (int8 for int8/int4; uint8 0/1 sign bits, 1 =
    negative, for sign; the values themselves for fp32/fp16), ``scales`` (f32, one per block) and
    ``dequantized``: the f32 values the receiver rebuilds."""

    encoding: str
    block: int
    codes: torch.Tensor
    scales: torch.Tensor
    dequantized: torch.Tensor


def _round_half_even(values: torch.Tensor) -> torch.Tensor:
    """Round to the nearest integer, ties to even (``torch.round`` is slow on some CPU builds:
    600 ns a value under AVX512 here, so the host rounds with numpy)."""
    if values.device.type == "cpu":
        return torch.from_numpy(np.rint(values.numpy()))
    return torch.round(values)


def _blocks(values: torch.Tensor, block: int, fill: float = 0.0) -> torch.Tensor:
    """``values`` as rows of one block each (the last padded with ``fill``)."""
    count = values.numel()
    width = count if block == 0 or block >= count else block
    rows = -(-count // width)
    if rows * width == count:
        return values.view(rows, width)
    padded = torch.full((rows * width,), fill, dtype=values.dtype, device=values.device)
    padded[:count] = values
    return padded.view(rows, width)


def encode_values(values: torch.Tensor, encoding: str, block: int = 0) -> Coded:
    """The wire form of the flat ``values`` in ``encoding`` (see the module's arithmetic)."""
    if encoding not in ENCODING_CODES:
        raise ValueError(f"unknown value encoding {encoding!r}; one of {', '.join(ENCODINGS)}")
    if block < 0:
        raise ValueError(f"block size {block} < 0")
    values = values.detach().reshape(-1)
    if not torch.isfinite(values).all():
        raise ValueError("values must be finite")
    count = values.numel()
    empty = torch.zeros(0, dtype=torch.float32, device=values.device)
    if encoding in ("fp32", "fp16"):
        dtype = torch.float32 if encoding == "fp32" else torch.float16
        raw = values.to(torch.float32)
        sent = (raw.clamp(-FP16_MAX, FP16_MAX) if encoding == "fp16" else raw).to(dtype)
        return Coded(encoding, block, sent, empty, sent.to(torch.float32))
    values = values.to(torch.float32)
    if count == 0:
        return Coded(encoding, block, torch.zeros(0, dtype=torch.int8 if encoding in LEVELS else torch.uint8,
                                                  device=values.device), empty, empty)
    rows = _blocks(values, block)
    if encoding == "sign":
        magnitudes = rows.abs().to(torch.float64).cpu().numpy()
        sums = np.cumsum(magnitudes, axis=1)[:, -1]  # one after the other in index order (padding adds 0)
        width = rows.shape[1]
        lengths = np.full(rows.shape[0], width, dtype=np.float64)
        lengths[-1] = count - width * (rows.shape[0] - 1)
        scales = torch.from_numpy((sums / lengths).astype(np.float32)).to(values.device)
        negative = torch.signbit(values)
        codes = negative.to(torch.uint8)
        per_value = scales.repeat_interleave(width)[:count]
        return Coded(encoding, block, codes, scales, torch.where(negative, -per_value, per_value))
    levels = LEVELS[encoding]
    maxima = rows.abs().amax(dim=1)
    scales = maxima / torch.full_like(maxima, levels)  # a tensor divisor: one IEEE f32 division on every device
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    codes = _round_half_even(rows / safe[:, None]).clamp_(-levels, levels)
    codes = torch.where(scales[:, None] > 0, codes, torch.zeros_like(codes)).reshape(-1)[:count].to(torch.int8)
    per_value = scales.repeat_interleave(rows.shape[1])[:count]
    dequantized = codes.to(torch.float32) * per_value  # through the integer: a code −0 is 0, as decoded
    if not torch.isfinite(dequantized).all():  # a block near the f32 maximum: code · scale rounds up past it
        raise ValueError("values too close to the f32 maximum for a scaled encoding")
    return Coded(encoding, block, codes, scales, dequantized)


def quantize(values: torch.Tensor, encoding: str, block: int = 0) -> torch.Tensor:
    """What the receiver decodes for ``values`` sent in ``encoding`` (f32, ``values``' shape and
    device): the error-feedback residual keeps ``values − quantize(values, …)``."""
    return encode_values(values, encoding, block).dequantized.reshape(values.shape)


def dequantize(codes: torch.Tensor, scales: torch.Tensor, encoding: str, block: int) -> torch.Tensor:
    """The receiver's values from decoded ``codes`` and ``scales``: ``c · scale`` (int8, int4) or
    ``±scale`` by the sign bit (sign), per value's block; f32."""
    count = codes.numel()
    if encoding in ("fp32", "fp16"):
        return codes.to(torch.float32)
    width = count if block == 0 or block >= count else block
    per_value = scales.to(torch.float32).repeat_interleave(width)[:count] if count else scales[:0]
    if encoding == "sign":
        return torch.where(codes.bool(), -per_value, per_value)
    return codes.to(torch.float32) * per_value
