"""Golomb–Rice index blocks of wire format v3 (docs/wire-format.md, "Format v3"), vectorized in numpy.

An index block is ``varint k`` and, when ``k > 0``, ``u8 b`` (the Rice parameter) and one bit
stream: first the ``k`` unary quotients (``gap >> b`` zero bits, then a one bit), then the ``k``
remainders (``gap & (2**b - 1)``, ``b`` bits each, low bit first), then zero padding to a byte.
Keeping the quotients and the remainders in two runs instead of interleaving them costs no bit and
lets both sides work on whole arrays: the quotients end at the stream's first ``k`` one bits.

No Flower imports; ``fedgc.wire.codec`` turns the errors into rejection reasons.
"""

from __future__ import annotations

import numpy as np

from fedgc.wire.varint import IndexCodingError, IndexTruncated, index_gaps, read_varint, varint_bytes

MAX_RICE_PARAMETER = 48  # a remainder and its bit offset within a byte fit 7 bytes of one int64


def rice_parameter(gap_sum: int, count: int) -> int:
    """The encoder's rule: ``b = floor(log2(floor(S / k)))`` for ``S`` the sum of the ``k`` gaps, 0
    when the mean gap is below 1 (and at most 48). Integers only, so every language picks the same
    ``b``. For geometric gaps (a random pattern) the best power of two is about
    ``floor(log2(0.96 · mean))``; this rule is off by one only in a narrow band of means, where it
    costs under 0.1 bit per index (bench/wire.py prints it beside the best ``b``)."""
    mean = gap_sum // count if count else 0
    return min(MAX_RICE_PARAMETER, max(0, mean.bit_length() - 1))


def max_rice_parameter(numel: int) -> int:
    """The largest ``b`` a decoder accepts for a tensor of ``numel`` entries: ``2**b ≤ numel``
    (no gap reaches ``numel``, so a larger ``b`` only wastes bits) and ``b ≤ 48``; 0 when empty."""
    return min(MAX_RICE_PARAMETER, max(0, numel.bit_length() - 1))


def _gather_fields(data: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """The ``width``-bit fields (≤ 48) at bit ``offsets`` of ``data`` (which holds them all), int64."""
    padded = np.concatenate((data, np.zeros(8, dtype=np.uint8)))
    first = offsets >> 3
    words = padded[first].astype(np.int64)  # only the bytes that hold a field are widened
    for t in range(1, (width + 7 + 7) // 8):
        words |= padded[first + t].astype(np.int64) << (8 * t)
    out: np.ndarray = (words >> (offsets & 7)) & ((1 << width) - 1)
    return out


def _low_bits(values: np.ndarray, width: int) -> np.ndarray:
    """The low ``width`` bits (1…48) of each of the non-negative int64 ``values``, low bit first:
    a (len, width) uint8 array of 0/1, unpacked from the values' little-endian bytes."""
    size = 1 if width <= 8 else 2 if width <= 16 else 4 if width <= 32 else 8
    narrow = (values & ((1 << width) - 1)).astype(f"<u{size}")
    bits = np.unpackbits(narrow.view(np.uint8), bitorder="little").reshape(values.size, 8 * size)
    return bits[:, :width]


def stream_bits(gaps: np.ndarray, b: int) -> int:
    """Bits of the stream for these gaps and parameter ``b``, before padding."""
    return int((gaps >> b).sum()) + gaps.size * (b + 1)


def encode_rice(indices: np.ndarray, numel: int, b: int | None = None) -> np.ndarray:
    """Strictly increasing flat ``indices`` (< ``numel``) → the v3 index block. ``b`` defaults to
    ``rice_parameter`` of the gaps; a given ``b`` must be within ``max_rice_parameter(numel)``."""
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    count = indices.size
    head = varint_bytes(count)
    if count == 0:
        return np.frombuffer(head, dtype=np.uint8).copy()
    gaps = index_gaps(indices)
    if gaps.min() < 0 or int(indices[-1]) >= numel:
        raise ValueError("indices must be strictly increasing and below the tensor's size")
    if b is None:
        b = rice_parameter(int(gaps.sum()), count)
    if not 0 <= b <= max_rice_parameter(numel):
        raise ValueError(f"Rice parameter {b} outside 0…{max_rice_parameter(numel)} for {numel} entries")
    ends = np.cumsum((gaps >> b) + 1) - 1  # quotient j: that many zero bits, then a one bit
    unary_bits = int(ends[-1]) + 1
    bits = np.zeros(unary_bits + count * b, dtype=np.uint8)  # one byte per bit: ≤ numel + k·(b + 1)
    bits[ends] = 1
    if b:
        bits[unary_bits:].reshape(count, b)[...] = _low_bits(gaps, b)
    stream = np.packbits(bits, bitorder="little")
    return np.concatenate((np.frombuffer(head + bytes((b,)), dtype=np.uint8), stream))


def decode_rice(data: np.ndarray, numel: int) -> tuple[np.ndarray, int]:
    """Read one v3 index block from the start of ``data``: (indices int64, bytes used).

    Checked in reading order (docs/wire-format.md, "Format v3, which reason"): ``k`` (cut:
    IndexTruncated; ``k > numel``: IndexCodingError), then ``b`` (missing: IndexTruncated; above
    ``max_rice_parameter``: IndexCodingError), then the quotients (the blob ends before the ``k``-th
    one bit: IndexTruncated; no ``k``-th one bit within the most a valid block can hold,
    ``((numel − k) >> b) + k`` bits: IndexCodingError), then the remainders (cut: IndexTruncated),
    the padding bits (set: IndexCodingError) and the last index (≥ ``numel``: IndexCodingError).
    Nothing is allocated beyond the bytes those bounds allow, whatever the blob says."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    count, used = read_varint(data[:10].tobytes())
    if count > numel:
        raise IndexCodingError(f"{count} indices for {numel} entries")
    if count == 0:
        return np.zeros(0, dtype=np.int64), used
    if data.size <= used:
        raise IndexTruncated("no Rice parameter byte")
    b = int(data[used])
    if b > max_rice_parameter(numel):
        raise IndexCodingError(f"Rice parameter {b} above {max_rice_parameter(numel)} for {numel} entries")
    start = used + 1
    body = data[start:]
    # Σ quotients ≤ (Σ gaps) >> b ≤ (numel − k) >> b: the k one bits end within this many bits.
    unary_max = ((numel - count) >> b) + count
    window = np.unpackbits(body[: -(-unary_max // 8)], bitorder="little")[:unary_max]
    ends = np.flatnonzero(window.view(bool))[:count]  # 0/1 bytes: as bools, numpy's fast path
    if ends.size < count:
        if window.size < unary_max:
            raise IndexTruncated(f"the blob ends within the unary part of gap {ends.size}")
        raise IndexCodingError(f"gap {ends.size}: the gaps run past {numel} entries")
    unary_bits = int(ends[-1]) + 1
    total_bits = unary_bits + count * b
    nbytes = -(-total_bits // 8)
    if body.size < nbytes:
        raise IndexTruncated(f"Rice stream needs {nbytes} bytes, {body.size} left")
    if total_bits % 8 and int(body[nbytes - 1]) >> (total_bits % 8):
        raise IndexCodingError("Rice stream padding bits set")
    gaps = index_gaps(ends) << b
    if b:
        gaps |= _gather_fields(body[:nbytes], unary_bits + b * np.arange(count, dtype=np.int64), b)
    indices = np.cumsum(gaps + 1) - 1
    if int(indices[-1]) >= numel:
        raise IndexCodingError(f"index {int(indices[-1])} ≥ {numel}")
    return indices, start + nbytes
