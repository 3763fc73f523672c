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
    values = np.ascontiguousarray(values, dtype=np.uint64).reshape(-1)
    if values.size == 0:
        return np.zeros(0, dtype=np.uint8)
    top = int(values.max())
    if top < 0x80:  # every value one byte (gaps of a dense pattern, small counts)
        return values.astype(np.uint8)
    width = (top.bit_length() + 6) // 7  # the longest varint's bytes, ≤ 10
    # One row per value, one column per 7-bit group: byte j of a value is there when value >> 7j > 0
    # (or j = 0), and carries the high bit when byte j + 1 is there; row-major order is the wire order.
    rest = values.astype(np.uint16 if top < 1 << 16 else np.uint32 if top < 1 << 32 else np.uint64)
    groups = np.empty((values.size, width), dtype=np.uint8)
    present = np.empty((values.size, width), dtype=bool)
    present[:, 0] = True
    for j in range(width):
        if j:
            rest = np.right_shift(rest, 7)
            np.not_equal(rest, 0, out=present[:, j])
        np.bitwise_and(rest, 0x7F, out=groups[:, j], casting="unsafe")
    groups[:, :-1] |= present[:, 1:].view(np.uint8) << np.uint8(7)
    out: np.ndarray = groups[present]
    return out


def varint_bytes(value: int) -> bytes:
    """One LEB128 varint of ``0 ≤ value < 2**64`` (as ``encode_varints`` writes it), without numpy."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"varint {value} outside 0…2**64−1")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """The varint at ``pos`` of ``data`` and the bytes it takes, as ``read_varints(data[pos:], 1)``
    finds them (the same errors), without numpy: it looks at ≤ 10 bytes."""
    window = data[pos : pos + MAX_VARINT_BYTES]
    value = 0
    for j, byte in enumerate(window):
        value |= (byte & 0x7F) << (7 * j)
        if byte < 0x80:
            if j == MAX_VARINT_BYTES - 1 and byte > 1:
                raise VarintError("varint ≥ 2**64")
            return value, j + 1
    if len(window) == MAX_VARINT_BYTES:  # the bytes are there: the varint never ends in 10
        raise VarintError("varint longer than 10 bytes")
    raise IndexTruncated("truncated varint")


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
    position = np.arange(data.size) - np.repeat(starts, lengths)
    parts = (data & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts)  # each varint's groups hold disjoint bits


def read_varints(data: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """The first ``count`` varints of ``data`` and the number of bytes they take.

    Looks at no more than ``count`` × 10 bytes, so reading a few varints at the start of a large blob
    costs (and allocates) a few bytes, not the blob's size."""
    if count == 0:
        return np.zeros(0, dtype=np.uint64), 0
    if count == 1:  # a count or a block size ahead of a block: a few bytes, read without numpy
        value, used = read_varint(np.ascontiguousarray(data[:MAX_VARINT_BYTES], dtype=np.uint8).tobytes())
        return np.array([value], dtype=np.uint64), used
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
    # Gaps mostly take one or two bytes: the first ``count`` varint ends of a shorter prefix, when it
    # holds that many, are those of the whole window, without scanning the bytes after the block.
    ends = np.flatnonzero(window[: 3 * count] < 0x80)
    if ends.size < count:
        ends = np.flatnonzero(window < 0x80)
    ends = ends[:count]
    failures: list[tuple[int, IndexCodingError]] = []
    indices = np.zeros(0, dtype=np.int64)
    if ends.size:
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        lengths = ends - starts + 1
        longest = int(lengths.max())
        values = (window[starts] & 0x7F).astype(np.uint64)
        for j in range(1, min(longest, MAX_VARINT_BYTES)):  # one vectorised pass per byte position in use
            sel = np.flatnonzero(lengths > j)
            values[sel] |= (window[starts[sel] + j] & 0x7F).astype(np.uint64) << np.uint64(7 * j)
        if longest >= MAX_VARINT_BYTES:
            bad_varint = (lengths > MAX_VARINT_BYTES) | ((lengths == MAX_VARINT_BYTES) & (window[ends] > 1))
            if bad_varint.any():
                failures.append((int(np.argmax(bad_varint)), VarintError("varint longer than 10 bytes or ≥ 2**64")))
        gaps = np.minimum(values, np.uint64(numel)).astype(np.int64)  # a gap ≥ numel is out of bounds anyway
        indices = np.cumsum(gaps + 1) - 1  # strictly increasing: the first one ≥ numel is found by bisection
        if int(indices[-1]) >= numel:
            failures.append((int(np.searchsorted(indices, numel)), IndexCodingError("index out of bounds")))
    if ends.size < count:  # gap number ends.size never ends: cut by the blob, or longer than 10 bytes
        start = int(ends[-1]) + 1 if ends.size else 0
        failures.append((ends.size, VarintError("varint longer than 10 bytes")
                         if body.size - start >= MAX_VARINT_BYTES else IndexTruncated("truncated varint")))
    if failures:
        raise min(failures, key=lambda f: f[0])[1]
    return indices, int(ends[-1]) + 1


INDEX_MODE_VARINT = 0
INDEX_MODE_BITMAP = 1


def encode_indices(indices: np.ndarray, numel: int) -> np.ndarray:
    """Strictly increasing flat indices → one mode byte + body, whichever form is smaller.

    varint mode (0): varint k, then k gaps (index − previous index − 1, the first relative to −1).
    bitmap mode (1): ceil(numel / 8) bytes, bit i of byte j ↔ index 8j + i; k = number of set bits.
    """
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    head = np.frombuffer(bytes([INDEX_MODE_VARINT]) + varint_bytes(indices.size), dtype=np.uint8)
    gaps = encode_varints(index_gaps(indices).astype(np.uint64))
    if head.size - 1 + gaps.size <= (numel + 7) // 8:
        return np.concatenate((head, gaps))
    bits = np.zeros(numel, dtype=np.uint8)
    bits[indices] = 1
    return np.concatenate((np.array([INDEX_MODE_BITMAP], dtype=np.uint8), np.packbits(bits, bitorder="little")))


def index_gaps(indices: np.ndarray) -> np.ndarray:
    """``index − previous index − 1`` of flat int64 ``indices``, the first relative to −1
    (``np.diff(indices, prepend=-1) - 1`` in one pass)."""
    gaps = np.empty_like(indices)
    if indices.size:
        gaps[0] = indices[0]
        np.subtract(indices[1:], indices[:-1], out=gaps[1:])
        gaps[1:] -= 1
    return gaps


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
