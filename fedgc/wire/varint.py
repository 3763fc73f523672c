"""Vectorised LEB128 varints and sparse index coding (delta + varint, or a bitmap), in numpy.

No Flower imports: ``fedgc.wire.codec`` builds the update blob from these bytes.
"""

from __future__ import annotations

import numpy as np

MAX_VARINT_BYTES = 10  # enough for any uint64


class IndexCodingError(ValueError):
    """Malformed index bytes."""


class VarintError(IndexCodingError):
    """A varint that does not fit in 64 bits: longer than 10 bytes, or a 10th byte above 1."""


class IndexTruncated(IndexCodingError):
    """Varint or index bytes cut by the end of the data (the codec's ``truncated``)."""


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
        raise IndexTruncated("truncated varint")
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if lengths.max() > MAX_VARINT_BYTES:
        raise VarintError("varint longer than 10 bytes")
    # A 10-byte varint holds bits 63… in its last byte: anything above 1 there is ≥ 2**64 (it would wrap).
    if (data[ends[lengths == MAX_VARINT_BYTES]] > 1).any():
        raise VarintError("varint ≥ 2**64")
    group_of_byte = np.repeat(np.arange(ends.size), lengths)
    position = np.arange(data.size) - starts[group_of_byte]
    parts = (data & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    out = np.zeros(ends.size, dtype=np.uint64)
    np.add.at(out, group_of_byte, parts)
    return out


def read_varints(data: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """The first ``count`` varints of ``data`` and the number of bytes they take.

    Looks at no more than ``count`` × 10 bytes, so reading a few varints at the start of a large blob
    costs (and allocates) a few bytes, not the blob's size."""
    if count == 0:
        return np.zeros(0, dtype=np.uint64), 0
    data = np.ascontiguousarray(data[: count * MAX_VARINT_BYTES], dtype=np.uint8)
    ends = np.flatnonzero((data & 0x80) == 0)
    if ends.size < count:
        if data.size == count * MAX_VARINT_BYTES:  # the bytes are there: some varint never ends in 10
            raise VarintError("varint longer than 10 bytes")
        raise IndexTruncated("truncated varint")
    used = int(ends[count - 1]) + 1
    return decode_varints(data[:used]), used


def _read_gaps(body: np.ndarray, count: int, numel: int) -> tuple[np.ndarray, int]:
    """``count`` gap varints → indices, checked one at a time in order: the first gap that is cut
    (IndexTruncated), too long or ≥ 2**64 (VarintError), or puts its index at ≥ ``numel``
    (IndexCodingError) names the error, as a decoder reading them one by one would find it."""
    if count == 0:
        return np.zeros(0, dtype=np.int64), 0
    window = body[: count * MAX_VARINT_BYTES]
    ends = np.flatnonzero((window & 0x80) == 0)[:count]
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    lengths = ends - starts + 1
    bad_varint = (lengths > MAX_VARINT_BYTES) | ((lengths == MAX_VARINT_BYTES) & (window[ends] > 1))
    short = np.minimum(lengths, MAX_VARINT_BYTES)
    values = np.zeros(ends.size, dtype=np.uint64)
    for j in range(MAX_VARINT_BYTES):  # ≤ 10 vectorised passes, one per byte position
        sel = short > j
        values[sel] |= (window[starts[sel] + j] & 0x7F).astype(np.uint64) << np.uint64(7 * j)
    gaps = np.minimum(values, np.uint64(numel)).astype(np.int64)  # a gap ≥ numel is out of bounds anyway
    indices = np.cumsum(gaps + 1) - 1
    failures = [(int(np.argmax(bad_varint)), VarintError("varint longer than 10 bytes or ≥ 2**64"))
                if bad_varint.any() else None,
                (int(np.argmax(indices >= numel)), IndexCodingError("index out of bounds"))
                if (indices >= numel).any() else None]
    if ends.size < count:  # gap number ends.size never ends: cut by the blob, or longer than 10 bytes
        start = int(ends[-1]) + 1 if ends.size else 0
        failures.append((ends.size, VarintError("varint longer than 10 bytes")
                         if body.size - start >= MAX_VARINT_BYTES else IndexTruncated("truncated varint")))
    found = [f for f in failures if f is not None]
    if found:
        raise min(found, key=lambda f: f[0])[1]
    return indices, int(ends[-1]) + 1


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
    """Read one index block from the start of ``data``: (indices, bytes used). Checks in reading order
    (docs/wire-format.md, "Which reason"): mode byte, then k, then each gap; or the whole bitmap."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if data.size == 0:
        raise IndexTruncated("no index mode byte")
    mode, body = int(data[0]), data[1:]
    if mode == INDEX_MODE_VARINT:
        (count,), used = read_varints(body, 1)
        if count > numel:
            raise IndexCodingError(f"{count} indices for {numel} entries")
        indices, more = _read_gaps(body[used:], int(count), numel)
        return indices, 1 + used + more
    if mode == INDEX_MODE_BITMAP:
        used = (numel + 7) // 8
        if body.size < used:
            raise IndexTruncated(f"bitmap has {body.size} bytes, expected {used}")
        bits = np.unpackbits(body[:used], bitorder="little")
        if bits[numel:].any():
            raise IndexCodingError("bitmap sets bits past the tensor's end")
        return np.flatnonzero(bits[:numel]).astype(np.int64), 1 + used
    raise IndexCodingError(f"unknown index mode {mode}")
