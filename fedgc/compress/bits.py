"""Bit packing for sign, ternary and fixed-width integer payloads (numpy, vectorised).

Conventions (also the wire format, docs/wire-format.md): bits are little-endian within a byte
(element i ↔ bit i % 8 of byte i // 8); padding bits past the last element are zero. Trits are
packed five to a byte in base 3 (element 5j + t contributes code · 3**t to byte j; bytes ≤ 242),
1.6 bits per element.
"""

from __future__ import annotations

import numpy as np
import torch


class PackingError(ValueError):
    """Packed bytes that do not describe ``n`` elements canonically."""


def packed_len(n: int, width: int = 1) -> int:
    return (n * width + 7) // 8


def pack_bits(flags: torch.Tensor) -> torch.Tensor:
    """Bool tensor → uint8 tensor of ceil(n/8) bytes."""
    bits = flags.detach().flatten().cpu().numpy().astype(np.uint8)
    return torch.from_numpy(np.packbits(bits, bitorder="little"))


def unpack_bits(packed: torch.Tensor | np.ndarray, n: int) -> torch.Tensor:
    data = np.asarray(packed, dtype=np.uint8)
    if data.size != packed_len(n):
        raise PackingError(f"{data.size} bytes for {n} bits, expected {packed_len(n)}")
    bits = np.unpackbits(data, bitorder="little")
    if bits[n:].any():
        raise PackingError("padding bits are not zero")
    return torch.from_numpy(bits[:n].astype(bool))


def pack_uint(codes: torch.Tensor, width: int) -> torch.Tensor:
    """Unsigned codes < 2**width → ``width`` bits each, low bit first, concatenated."""
    values = codes.detach().flatten().cpu().numpy().astype(np.uint64)
    shifts = np.arange(width, dtype=np.uint64)
    bits = ((values[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)
    return torch.from_numpy(np.packbits(bits.reshape(-1), bitorder="little"))


UINT_CHUNK = 1 << 13  # codes unpacked per step (a multiple of 8, so every chunk starts on a byte)


def unpack_uint(packed: torch.Tensor | np.ndarray, n: int, width: int) -> torch.Tensor:
    """``n`` codes of ``width`` bits (1…63) → int64. Unpacked a chunk at a time, so the temporary
    bit arrays stay small whatever ``n`` is: the only allocation that grows with ``n`` is the result."""
    data = np.asarray(packed, dtype=np.uint8)
    if not 1 <= width <= 63:
        raise PackingError(f"code width {width} outside 1…63")
    if data.size != packed_len(n, width):
        raise PackingError(f"{data.size} bytes for {n} codes of {width} bits")
    padding = data.size * 8 - n * width
    if padding and int(data[-1]) >> (8 - padding):
        raise PackingError("padding bits are not zero")
    weights = np.int64(1) << np.arange(width, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    step = UINT_CHUNK * width // 8  # bytes per chunk
    for start in range(0, n, UINT_CHUNK):
        count = min(UINT_CHUNK, n - start)
        chunk = data[start * width // 8 : start * width // 8 + step]
        bits = np.unpackbits(chunk, bitorder="little", count=count * width)
        out[start : start + count] = bits.reshape(count, width).astype(np.int64) @ weights
    return torch.from_numpy(out)


_POW3 = np.array([1, 3, 9, 27, 81], dtype=np.uint16)


def pack_trits(codes: torch.Tensor) -> torch.Tensor:
    """Codes in {0, 1, 2} → ceil(n/5) bytes, base 3."""
    values = codes.detach().flatten().cpu().numpy().astype(np.uint16)
    padded = np.zeros(-(-values.size // 5) * 5, dtype=np.uint16)
    padded[: values.size] = values
    return torch.from_numpy((padded.reshape(-1, 5) @ _POW3).astype(np.uint8))


def unpack_trits(packed: torch.Tensor | np.ndarray, n: int) -> torch.Tensor:
    data = np.asarray(packed, dtype=np.uint8)
    if data.size != -(-n // 5):
        raise PackingError(f"{data.size} bytes for {n} trits, expected {-(-n // 5)}")
    if data.size and data.max() > 242:
        raise PackingError("trit byte above 242")
    digits = (data.astype(np.int64)[:, None] // _POW3.astype(np.int64)) % 3
    flat = digits.reshape(-1)
    if flat[n:].any():
        raise PackingError("padding trits are not zero")
    return torch.from_numpy(flat[:n].copy())
