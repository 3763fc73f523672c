"""Vectorised LEB128 varints and sparse index coding (delta + varint, or a bitmap), in numpy.

No Flower imports: the codec in ``codec.py`` frames these bytes into Flower records.
"""

from __future__ import annotations

import numpy as np

MAX_VARINT_BYTES = 10  # enough for any uint64


class IndexCodingError(ValueError):
    """Malformed index bytes."""


def encode_varints(values: np.ndarray) -> np.ndarray:
    """LEB128: 7 bits per byte, low group first, high bit set on every byte but the last."""
    values = np.ascontiguousarray(values, dtype=np.uint64)
    if values.size == 0:
        return np.zeros(0, dtype=np.uint8)
    nbytes = np.ones(values.size, dtype=np.int64)
    rest = values >> np.uint64(7)
    while rest.any():
        nbytes += rest > 0
        rest >>= np.uint64(7)
    starts = np.cumsum(nbytes) - nbytes
    out = np.empty(int(nbytes.sum()), dtype=np.uint8)
    for j in range(int(nbytes.max())):
        sel = nbytes > j
        group = (values[sel] >> np.uint64(7 * j)) & np.uint64(0x7F)
        more = (nbytes[sel] > j + 1).astype(np.uint64) << np.uint64(7)
        out[starts[sel] + j] = (group | more).astype(np.uint8)
    return out


def decode_varints(data: np.ndarray) -> np.ndarray:
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if data.size == 0:
        return np.zeros(0, dtype=np.uint64)
    ends = np.flatnonzero((data & 0x80) == 0)
    if ends.size == 0 or ends[-1] != data.size - 1:
        raise IndexCodingError("truncated varint")
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if lengths.max() > MAX_VARINT_BYTES:
        raise IndexCodingError("varint longer than 10 bytes")
    group_of_byte = np.repeat(np.arange(ends.size), lengths)
    position = np.arange(data.size) - starts[group_of_byte]
    parts = (data & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    out = np.zeros(ends.size, dtype=np.uint64)
    np.add.at(out, group_of_byte, parts)
    return out


def read_varints(data: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """The first ``count`` varints of ``data`` and the number of bytes they take."""
    if count == 0:
        return np.zeros(0, dtype=np.uint64), 0
    data = np.ascontiguousarray(data, dtype=np.uint8)
    ends = np.flatnonzero((data & 0x80) == 0)
    if ends.size < count:
        raise IndexCodingError("truncated varint")
    used = int(ends[count - 1]) + 1
    return decode_varints(data[:used]), used


INDEX_MODE_VARINT = 0
INDEX_MODE_BITMAP = 1


def encode_indices(indices: np.ndarray, numel: int) -> np.ndarray:
    """Strictly increasing flat indices → one mode byte + body, whichever form is smaller.

    varint mode (0): varint k, then k gaps (index − previous index − 1, the first relative to −1).
    bitmap mode (1): ceil(numel / 8) bytes, bit i of byte j ↔ index 8j + i; k = number of set bits.
    """
    indices = np.asarray(indices, dtype=np.int64)
    gaps = np.diff(indices, prepend=-1) - 1
    varints = np.concatenate((encode_varints(np.array([indices.size])), encode_varints(gaps.astype(np.uint64))))
    if varints.size <= (numel + 7) // 8:
        return np.concatenate(([INDEX_MODE_VARINT], varints)).astype(np.uint8)
    bits = np.zeros(numel, dtype=np.uint8)
    bits[indices] = 1
    return np.concatenate(([INDEX_MODE_BITMAP], np.packbits(bits, bitorder="little"))).astype(np.uint8)


def decode_indices(data: np.ndarray, numel: int) -> tuple[np.ndarray, int]:
    """Read one index block from the start of ``data``: (indices, bytes used). Validates bounds."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if data.size == 0:
        raise IndexCodingError("empty index block")
    mode, body = int(data[0]), data[1:]
    if mode == INDEX_MODE_VARINT:
        (count,), used = read_varints(body, 1)
        if count > numel:
            raise IndexCodingError(f"{count} indices for {numel} entries")
        gaps, more = read_varints(body[used:], int(count))
        used += more
        if gaps.size and gaps.max() >= np.uint64(numel):
            raise IndexCodingError("index out of bounds")
        indices = np.cumsum(gaps.astype(np.int64) + 1) - 1
    elif mode == INDEX_MODE_BITMAP:
        used = (numel + 7) // 8
        if body.size < used:
            raise IndexCodingError(f"bitmap has {body.size} bytes, expected {used}")
        bits = np.unpackbits(body[:used], bitorder="little")
        if bits[numel:].any():
            raise IndexCodingError("bitmap sets bits past the tensor's end")
        indices = np.flatnonzero(bits[:numel]).astype(np.int64)
    else:
        raise IndexCodingError(f"unknown index mode {mode}")
    if indices.size and indices[-1] >= numel:
        raise IndexCodingError("index out of bounds")
    return indices, 1 + used
