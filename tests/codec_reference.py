"""The wire codec as it was before its per-message cost was cut (fedgc/wire/varint.py, golomb.py,
codec.py and fedgc/flower/update_record.py at main fabd63e, verbatim but for imports): the reference
that tests/test_codec_exact.py holds the live codec to, blob for blob, payload for payload and error
for error. The exception classes are the live ones, so that a refusal compares by type. Not used by
fedgc itself; keep it as it is."""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import numpy as np
import torch
from flwr.app import Array, ArrayRecord

from fedgc.compress.bits import PackingError, packed_len
from fedgc.compress.payloads import (
    CodedSparsePayload,
    DensePayload,
    LowRankPayload,
    NaturalPayload,
    Payload,
    QuantizedPayload,
    SignPayload,
    SparsePayload,
    SparseTernaryPayload,
    TernaryPayload,
    VotePayload,
    payload_to,
)
from fedgc.flower.keys import UPDATE
from fedgc.wire.codec import CodecError
from fedgc.wire.quantize import (
    ENCODING_CODES,
    ENCODINGS,
    LEVELS,
    SCALED,
    Coded,
    block_count,
    code_bytes,
    dequantize,
    encode_values,
)
from fedgc.wire.varint import IndexCodingError, IndexTruncated, VarintError

UPDATE_KEY = UPDATE


# ---- fedgc/wire/varint.py
MAX_VARINT_BYTES = 10  # enough for any uint64


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


# ---- fedgc/wire/golomb.py
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
    padded = np.concatenate((data, np.zeros(8, dtype=np.uint8))).astype(np.int64)
    first = offsets >> 3
    words = np.zeros(offsets.size, dtype=np.int64)
    for t in range((width + 7 + 7) // 8):
        words |= padded[first + t] << (8 * t)
    return (words >> (offsets & 7)) & ((1 << width) - 1)


def stream_bits(gaps: np.ndarray, b: int) -> int:
    """Bits of the stream for these gaps and parameter ``b``, before padding."""
    return int((gaps >> b).sum()) + gaps.size * (b + 1)


def encode_rice(indices: np.ndarray, numel: int, b: int | None = None) -> np.ndarray:
    """Strictly increasing flat ``indices`` (< ``numel``) → the v3 index block. ``b`` defaults to
    ``rice_parameter`` of the gaps; a given ``b`` must be within ``max_rice_parameter(numel)``."""
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    count = indices.size
    head = encode_varints(np.array([count], dtype=np.uint64))
    if count == 0:
        return head
    gaps = np.diff(indices, prepend=-1) - 1
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
        remainders = gaps & ((1 << b) - 1)
        columns = bits[unary_bits:].reshape(count, b)
        for t in range(b):  # b strided copies, not k·b scattered writes
            columns[:, t] = (remainders >> t) & 1
    stream = np.packbits(bits, bitorder="little")
    return np.concatenate((head, np.array([b], dtype=np.uint8), stream))


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
    (count,), used = read_varints(data, 1)
    count = int(count)
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
    ends = np.flatnonzero(window)[:count]
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
    gaps = (np.diff(ends, prepend=-1) - 1) << b
    if b:
        gaps |= _gather_fields(body[:nbytes], unary_bits + b * np.arange(count, dtype=np.int64), b)
    indices = np.cumsum(gaps + 1) - 1
    if int(indices[-1]) >= numel:
        raise IndexCodingError(f"index {int(indices[-1])} ≥ {numel}")
    return indices, start + nbytes


# ---- fedgc/wire/codec.py
VERSION = 1
VERSION_V3 = 3  # wire format v3 (docs/wire-format.md); version byte 2 is never written
VERSIONS = (VERSION, VERSION_V3)
DENSE, SPARSE, SIGN, VOTE, TERNARY, QSGD, NATURAL, LOWRANK, STC = range(9)
VALUE_DTYPES = {0: torch.float32, 1: torch.float16}
DTYPE_CODES = {torch.float32: 0, torch.float16: 1}
NUMPY_DTYPES = {torch.float32: "<f4", torch.float16: "<f2"}
MAX_QSGD_LEVELS = 32767


def _floats(values: torch.Tensor | list[float], dtype: torch.dtype = torch.float32) -> np.ndarray:
    array = torch.as_tensor(values, device="cpu").detach().to(dtype).flatten().numpy()
    return np.frombuffer(array.astype(NUMPY_DTYPES[dtype]).tobytes(), dtype=np.uint8)


def _u8(values: list[int] | torch.Tensor) -> np.ndarray:
    return np.asarray(values, dtype=np.uint8).reshape(-1)


def _body(payload: Payload) -> list[np.ndarray]:
    if isinstance(payload, DensePayload):
        dtype = payload.values.dtype
        return [_u8([DENSE, DTYPE_CODES[dtype]]), _floats(payload.values, dtype)]
    if isinstance(payload, SparsePayload):
        dtype = payload.values.dtype
        return [_u8([SPARSE, DTYPE_CODES[dtype]]), encode_indices(payload.indices.numpy(), payload.numel),
                _floats(payload.values, dtype)]
    if isinstance(payload, SignPayload):
        return [_u8([SIGN]), _floats([payload.pos_scale, payload.neg_scale]), _u8(payload.signs)]
    if isinstance(payload, VotePayload):
        return [_u8([VOTE]), _floats([payload.scale]), _u8(payload.signs)]
    if isinstance(payload, TernaryPayload):
        return [_u8([TERNARY]), _floats([payload.scale]), _u8(payload.trits)]
    if isinstance(payload, QuantizedPayload):
        return [_u8([QSGD]), encode_varints(np.array([payload.levels, payload.bucket_size], dtype=np.uint64)),
                _floats(payload.norms), _u8(payload.codes)]
    if isinstance(payload, NaturalPayload):
        return [_u8([NATURAL]), _u8(payload.exponents), _u8(payload.signs)]
    if isinstance(payload, LowRankPayload):
        dtype = payload.p.dtype
        return [_u8([LOWRANK, DTYPE_CODES[dtype]]), encode_varints(np.array([payload.p.shape[1]])),
                _floats(payload.p, dtype), _floats(payload.q, dtype)]
    if isinstance(payload, SparseTernaryPayload):
        numel = math.prod(payload.shape)
        return [_u8([STC]), _floats([payload.scale]), encode_indices(payload.indices.numpy(), numel),
                _u8(payload.signs)]
    raise TypeError(f"no wire format for {type(payload).__name__}")


def _coded(payload: SparsePayload, values: str | None, block: int) -> Coded:
    """The wire form of a sparse payload's values: as they are (``values=None``: a coded payload's
    own codes, else fp32 or fp16 by the values' dtype), or re-encoded in ``values``."""
    if isinstance(payload, CodedSparsePayload) and values in (None, payload.encoding) and (
            values is None or block == payload.block):
        return Coded(payload.encoding, payload.block, payload.codes, payload.scales, payload.values)
    if values is None:
        values = "fp16" if payload.values.dtype == torch.float16 else "fp32"
    return encode_values(payload.values, values, block)


def _code_bytes(coded: Coded) -> np.ndarray:
    if coded.encoding in ("fp32", "fp16"):
        return _floats(coded.codes, torch.float32 if coded.encoding == "fp32" else torch.float16)
    if coded.encoding == "int8":
        return coded.codes.to(torch.int8).numpy().view(np.uint8)
    if coded.encoding == "int4":
        nibbles = coded.codes.to(torch.int8).numpy().view(np.uint8) & 0x0F
        if nibbles.size % 2:
            nibbles = np.concatenate((nibbles, np.zeros(1, dtype=np.uint8)))
        return nibbles[0::2] | (nibbles[1::2] << 4)
    return np.packbits(coded.codes.numpy().astype(np.uint8), bitorder="little")  # sign bits


def _body_v3(payload: Payload, values: str | None, block: int) -> list[np.ndarray]:
    """Version 3 bodies: sparse and stc with a Golomb–Rice index block, sparse values encoded;
    every other kind as in version 1."""
    if isinstance(payload, SparsePayload):
        coded = _coded(payload, values, block)
        parts = [_u8([SPARSE, ENCODING_CODES[coded.encoding]]), encode_rice(payload.indices.numpy(), payload.numel)]
        if payload.indices.numel() == 0:
            return parts
        if coded.encoding in SCALED:
            parts += [encode_varints(np.array([coded.block], dtype=np.uint64)), _floats(coded.scales)]
        return [*parts, _code_bytes(coded)]
    if isinstance(payload, SparseTernaryPayload):
        return [_u8([STC]), _floats([payload.scale]), encode_rice(payload.indices.numpy(), math.prod(payload.shape)),
                _u8(payload.signs)]
    return _body(payload)


def encode_bytes(payloads: dict[str, Payload], version: int = VERSION, values: str | None = None,
                 block: int = 0) -> bytes:
    """The update blob: version byte, then each payload's kind and body in the order given.

    ``version=3`` writes wire format v3; ``values`` then picks the encoding of every sparse payload's
    values (``fp32``, ``fp16``, ``int8``, ``int4``, ``sign``; None: as each payload holds them) and
    ``block`` the values per scale of the scaled ones (0: one scale per tensor). What the receiver
    will see of a value is ``fedgc.wire.quantize.quantize(values, encoding, block)``."""
    if version not in VERSIONS:
        raise ValueError(f"wire format version {version}: one of {VERSIONS}")
    if version == VERSION and values is not None:
        raise ValueError("value encodings need version=3; version 1 sends each payload's values as they are")
    if values is not None and values not in ENCODING_CODES:
        raise ValueError(f"unknown value encoding {values!r}; one of {', '.join(ENCODINGS)}")
    if not 0 <= block < 2**64:
        raise ValueError(f"block size {block} outside 0…2**64−1")
    parts = [_u8([version])]
    for payload in payloads.values():
        payload = payload_to(payload, "cpu")  # a payload made on a GPU is written from the host
        parts.extend(_body_v3(payload, values, block) if version == VERSION_V3 else _body(payload))
    return np.concatenate(parts).tobytes()


class _Reader:
    def __init__(self, data: np.ndarray, name: str = "") -> None:
        self.data, self.pos, self.name = data, 0, name

    def take(self, count: int) -> np.ndarray:
        if count < 0 or self.pos + count > self.data.size:
            raise CodecError("truncated", f"{self.name}: needs {count} bytes at offset {self.pos}")
        chunk = self.data[self.pos : self.pos + count]
        self.pos += count
        return chunk

    def varint(self) -> int:
        try:
            (value,), used = read_varints(self.data[self.pos : self.pos + 10], 1)
        except VarintError as err:
            raise CodecError("bad-varint", f"{self.name}: {err}") from None
        except IndexCodingError as err:
            raise CodecError("truncated", f"{self.name}: {err}") from None
        self.pos += used
        return int(value)

    def floats(self, count: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        size = 4 if dtype == torch.float32 else 2
        raw = self.take(count * size).tobytes()
        values = torch.from_numpy(np.frombuffer(raw, dtype=NUMPY_DTYPES[dtype]).astype(NUMPY_DTYPES[dtype]))
        if not torch.isfinite(values).all():
            raise CodecError("non-finite", f"{self.name} holds NaN or Inf")
        return values.to(dtype)

    def scales(self, count: int) -> list[float]:
        values = self.floats(count)
        if (values < 0).any():
            raise CodecError("negative-scale", f"{self.name} has a negative scale")
        return [float(v) for v in values]

    def dtype(self) -> torch.dtype:
        code = int(self.take(1)[0])
        if code not in VALUE_DTYPES:
            raise CodecError("bad-dtype", f"{self.name}: value dtype code {code}")
        return VALUE_DTYPES[code]

    def indices(self, numel: int) -> torch.Tensor:
        """A version 1 index block (delta varints or a bitmap, ``fedgc.wire.varint``)."""
        return self._index_block(decode_indices, numel)

    def rice(self, numel: int) -> torch.Tensor:
        """A version 3 index block (``fedgc.wire.golomb``)."""
        return self._index_block(decode_rice, numel)

    def _index_block(self, decode: Callable[[np.ndarray, int], tuple[np.ndarray, int]], numel: int) -> torch.Tensor:
        try:
            indices, used = decode(self.data[self.pos :], numel)
        except VarintError as err:
            raise CodecError("bad-varint", f"{self.name}: {err}") from None
        except IndexTruncated as err:
            raise CodecError("truncated", f"{self.name}: {err}") from None
        except IndexCodingError as err:
            raise CodecError("bad-indices", f"{self.name}: {err}") from None
        self.pos += used
        return torch.from_numpy(indices)

    def packed(self, count: int, unpack: Callable[[np.ndarray], object]) -> torch.Tensor:
        """``count`` bytes, checked by ``unpack`` (raises PackingError) before they are kept."""
        data = self.take(count)
        try:
            unpack(data)
        except PackingError as err:
            raise CodecError("bad-bits", f"{self.name}: {err}") from None
        return torch.from_numpy(data.copy())


def _decode_one(r: _Reader, kind: int, shape: tuple[int, ...]) -> Payload:
    from fedgc.compress.bits import unpack_bits, unpack_trits, unpack_uint

    n = math.prod(shape)
    if kind == DENSE:
        dtype = r.dtype()
        return DensePayload(values=r.floats(n, dtype), shape=shape)
    if kind == SPARSE:
        dtype = r.dtype()
        indices = r.indices(n)
        return SparsePayload(indices=indices, values=r.floats(indices.numel(), dtype), shape=shape)
    if kind in (SIGN, VOTE):
        scales = r.scales(2 if kind == SIGN else 1)
        signs = r.packed(packed_len(n), lambda b: unpack_bits(b, n))
        if kind == SIGN:
            return SignPayload(signs=signs, pos_scale=scales[0], neg_scale=scales[1], shape=shape)
        return VotePayload(signs=signs, scale=scales[0], shape=shape)
    if kind == TERNARY:
        (scale,) = r.scales(1)
        return TernaryPayload(trits=r.packed(-(-n // 5), lambda b: unpack_trits(b, n)), scale=scale, shape=shape)
    if kind == QSGD:
        levels = r.varint()
        if not 1 <= levels <= MAX_QSGD_LEVELS:
            raise CodecError("bad-levels", f"{r.name}: levels={levels}")
        bucket = r.varint()
        if bucket < 1:
            raise CodecError("bad-levels", f"{r.name}: bucket size 0")
        # A bucket longer than the tensor is one bucket: ceil(n/d) ≤ n norms, and nothing is sized by d.
        norms = torch.tensor(r.scales(-(-n // bucket)), dtype=torch.float32, device="cpu")
        width = (2 * levels).bit_length()
        codes = r.packed(packed_len(n, width), lambda b: _check_levels(unpack_uint(b, n, width), levels, r.name))
        payload = QuantizedPayload(codes=codes, norms=norms, levels=levels, bucket_size=bucket, shape=shape)
        if not torch.isfinite(payload.to_dense()).all():  # a finite norm near the float max can overflow
            raise CodecError("non-finite", f"{r.name}: norm x level overflows")
        return payload
    if kind == NATURAL:
        exponents = r.take(n)
        if exponents.size and exponents.max() == 255:
            raise CodecError("non-finite", f"{r.name}: exponent 255 (Inf/NaN)")
        signs = r.packed(packed_len(n), lambda b: unpack_bits(b, n))
        return NaturalPayload(exponents=torch.from_numpy(exponents.copy()), signs=signs, shape=shape)
    if kind == LOWRANK:
        dtype = r.dtype()
        rows = shape[0] if shape else 1
        cols = n // rows if rows else 0
        rank = r.varint()
        if not 1 <= rank <= min(rows, cols):
            raise CodecError("bad-rank", f"{r.name}: rank {rank} for a {rows}x{cols} matrix")
        p = r.floats(rows * rank, dtype).reshape(rows, rank)
        lowrank = LowRankPayload(p=p, q=r.floats(cols * rank, dtype).reshape(cols, rank), shape=shape)
        if not torch.isfinite(lowrank.to_dense()).all():  # finite factors can still overflow P·Qᵀ
            raise CodecError("non-finite", f"{r.name}: P·Qᵀ overflows")
        return lowrank
    if kind == STC:
        (scale,) = r.scales(1)
        indices = r.indices(n)
        k = indices.numel()
        signs = r.packed(packed_len(k), lambda b: unpack_bits(b, k))
        return SparseTernaryPayload(indices=indices, signs=signs, scale=scale, shape=shape)
    raise CodecError("bad-kind", f"{r.name}: unknown payload kind {kind}")


def _decode_sparse_v3(r: _Reader, shape: tuple[int, ...]) -> SparsePayload:
    from fedgc.compress.bits import unpack_bits

    code = int(r.take(1)[0])
    if code >= len(ENCODINGS):
        raise CodecError("bad-dtype", f"{r.name}: value encoding code {code}")
    encoding = ENCODINGS[code]
    indices = r.rice(math.prod(shape))
    k = indices.numel()
    if encoding in ("fp32", "fp16"):
        dtype = torch.float32 if encoding == "fp32" else torch.float16
        return SparsePayload(indices=indices, values=r.floats(k, dtype), shape=shape)
    if k == 0:
        empty = torch.zeros(0, dtype=torch.float32)
        codes = torch.zeros(0, dtype=torch.int8 if encoding in LEVELS else torch.uint8)
        return CodedSparsePayload(indices=indices, values=empty, shape=shape, encoding=encoding, block=0,
                                  codes=codes, scales=empty)
    block = r.varint()
    scales = torch.tensor(r.scales(block_count(k, block)), dtype=torch.float32)
    raw = r.take(code_bytes(encoding, k))
    if encoding == "sign":
        try:
            codes = unpack_bits(torch.from_numpy(raw.copy()), k).to(torch.uint8)
        except PackingError as err:
            raise CodecError("bad-bits", f"{r.name}: {err}") from None
    else:
        if encoding == "int4":
            nibbles = np.stack((raw & 0x0F, raw >> 4), axis=1).reshape(-1)
            if nibbles[k:].any():
                raise CodecError("bad-bits", f"{r.name}: int4 padding nibble set")
            raw = nibbles[:k]
            raw = np.where(raw >= 8, raw.astype(np.int16) - 16, raw).astype(np.int8)  # 4-bit two's complement
        codes = torch.from_numpy(raw.view(np.int8).copy())
        if ((codes < -LEVELS[encoding]) | (codes > LEVELS[encoding])).any():  # −128 (int8), −8 (int4)
            raise CodecError("bad-levels", f"{r.name}: an {encoding} code outside ±{LEVELS[encoding]}")
    values = dequantize(codes, scales, encoding, block)
    if not torch.isfinite(values).all():  # a finite scale near the f32 maximum times a code can overflow
        raise CodecError("non-finite", f"{r.name}: code x scale overflows")
    return CodedSparsePayload(indices=indices, values=values, shape=shape, encoding=encoding, block=block,
                              codes=codes, scales=scales)


def _decode_one_v3(r: _Reader, kind: int, shape: tuple[int, ...]) -> Payload:
    if kind == SPARSE:
        return _decode_sparse_v3(r, shape)
    if kind == STC:
        from fedgc.compress.bits import unpack_bits

        (scale,) = r.scales(1)
        indices = r.rice(math.prod(shape))
        k = indices.numel()
        signs = r.packed(packed_len(k), lambda b: unpack_bits(b, k))
        return SparseTernaryPayload(indices=indices, signs=signs, scale=scale, shape=shape)
    return _decode_one(r, kind, shape)


def _check_levels(codes: torch.Tensor, levels: int, name: str) -> None:
    if codes.numel() and int(codes.max()) > 2 * levels:
        raise CodecError("bad-levels", f"{name}: code above 2·levels")


def decode_bytes(data: bytes | np.ndarray, shapes: dict[str, tuple[int, ...]]) -> dict[str, Payload]:
    """Validate and decode an update blob (version 1 or 3) against the model's parameter ``shapes``."""
    r = _Reader(np.frombuffer(bytes(data), dtype=np.uint8))
    version = int(r.take(1)[0]) if r.data.size else -1
    if version not in VERSIONS:
        raise CodecError("bad-version", f"format version {version}, expected one of {VERSIONS}")
    decode_one = _decode_one_v3 if version == VERSION_V3 else _decode_one
    payloads: dict[str, Payload] = {}
    for name, shape in shapes.items():
        r.name = name
        payloads[name] = decode_one(r, int(r.take(1)[0]), tuple(shape))
    if r.pos != r.data.size:
        raise CodecError("trailing-bytes", f"{r.data.size - r.pos} bytes after the last parameter")
    return payloads


# ---- fedgc/flower/update_record.py
def wire_version(payloads: dict[str, Payload]) -> int:
    """The blob version ``payloads`` travel in: 3 (wire format v3) when a sparse payload's values are
    in one of its encodings (``value_dtype`` int8, int4 or sign: a ``CodedSparsePayload``), else 1,
    which every client reads. Only a node that declared v3 at the census is sent one
    (``fedgc.flower.wire_versions``)."""
    return VERSION_V3 if any(isinstance(p, CodedSparsePayload) for p in payloads.values()) else VERSION


def encode_update(payloads: dict[str, Payload]) -> ArrayRecord:
    """``payloads`` must be in the model's parameter order (as ``compress_update`` produces them); the
    blob is in ``wire_version(payloads)``, each coded payload with its own codes and scales."""
    blob = encode_bytes(payloads, version=wire_version(payloads))
    return ArrayRecord({UPDATE_KEY: Array(np.frombuffer(blob, dtype=np.uint8).copy())})


def decode_update(record: ArrayRecord, shapes: dict[str, tuple[int, ...]]) -> dict[str, Payload]:
    """Validate and decode ``record`` against the model's parameter ``shapes``; raise ``CodecError``."""
    keys = list(record)
    if keys != [UPDATE_KEY]:
        raise CodecError("bad-record", f"expected one array {UPDATE_KEY!r}, got {keys[:4]}")
    array = record[UPDATE_KEY]
    if array.dtype != "uint8" or len(array.shape) != 1:
        raise CodecError("bad-dtype", f"update array is {array.dtype} {array.shape}, expected 1-D uint8")
    return decode_bytes(npy_bytes(array), shapes)


def npy_bytes(array: Array) -> np.ndarray:
    """The blob inside ``array``: ``stype`` "numpy.ndarray" and ``data`` one .npy file (as numpy reads
    it, no pickles) holding a uint8 array of the Array's own shape, nothing after it; else ``bad-array``."""
    if array.stype != "numpy.ndarray":
        raise CodecError("bad-array", f"stype {array.stype!r}, expected 'numpy.ndarray'")
    stream = io.BytesIO(array.data)
    try:  # numpy's own .npy reader (versions 1.0, 2.0, 3.0); not np.load, which would also try zip
        loaded = np.lib.format.read_array(stream, allow_pickle=False)
    except (ValueError, TypeError, EOFError, OSError, SyntaxError) as err:
        raise CodecError("bad-array", f"not a .npy file: {err}") from None
    if not isinstance(loaded, np.ndarray) or loaded.dtype != np.uint8 or loaded.shape != tuple(array.shape):
        raise CodecError("bad-array", f".npy holds {getattr(loaded, 'dtype', type(loaded).__name__)} "
                                      f"{getattr(loaded, 'shape', '')}, the Array says uint8 {tuple(array.shape)}")
    if stream.tell() != len(array.data):
        raise CodecError("bad-array", f"{len(array.data) - stream.tell()} bytes after the .npy array")
    return loaded
