"""The update blob: the cross-language wire format of a compressed update (docs/wire-format.md).

A blob is a version byte, then one entry per model parameter in the key order of the ``arrays``
record of the train message (the server's ``shapes``, buffers included): a kind byte and that
kind's body. Names and shapes are not sent: the server knows the model. Version 1 is the format every
client speaks; version 3 (``encode_bytes(..., version=3, values="int8")``) changes the sparse and
stc bodies only: Golomb–Rice index gaps (``fedgc.wire.golomb``) and, for sparse, a value encoding
(``fedgc.wire.quantize``). Decoding reads and checks
one field at a time, so the first failing check names the reason (``fedgc.wire.reasons``; the
precedence is in docs/wire-format.md), and raises ``CodecError``. No Flower here:
``fedgc.flower.update_record`` puts the blob into one ``ArrayRecord``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from fedgc.compress.bits import PackingError, packed_len, unpack_bits, unpack_trits, unpack_uint
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
from fedgc.wire.golomb import decode_rice, encode_rice
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
from fedgc.wire.varint import (
    IndexCodingError,
    IndexTruncated,
    VarintError,
    decode_indices,
    encode_indices,
    encode_varints,
    read_varint,
    varint_bytes,
)

VERSION = 1
VERSION_V3 = 3  # wire format v3 (docs/wire-format.md); version byte 2 is never written
VERSIONS = (VERSION, VERSION_V3)
DENSE, SPARSE, SIGN, VOTE, TERNARY, QSGD, NATURAL, LOWRANK, STC = range(9)
VALUE_DTYPES = {0: torch.float32, 1: torch.float16}
DTYPE_CODES = {torch.float32: 0, torch.float16: 1}
NUMPY_DTYPES = {torch.float32: "<f4", torch.float16: "<f2"}
MAX_QSGD_LEVELS = 32767


class CodecError(ValueError):
    """An update that cannot be decoded; ``reason`` is a short machine-readable tag."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


Part = bytes | np.ndarray  # a piece of a blob: bytes, or a C-contiguous uint8 array


def _floats(values: torch.Tensor | Sequence[float], dtype: torch.dtype = torch.float32) -> Part:
    """``values`` in ``dtype``, little-endian: a view of a CPU tensor's memory when it is already
    that (no copy until the blob is joined), else converted by torch as ``.to(dtype)`` does."""
    if not isinstance(values, torch.Tensor) and all(type(v) is float for v in values):
        # Python floats: numpy's double → f32/f16 rounding is IEEE round-to-nearest, as torch's
        return np.asarray(values, dtype=NUMPY_DTYPES[dtype]).view(np.uint8)
    array = torch.as_tensor(values, device="cpu").detach().to(dtype).reshape(-1).numpy()
    return np.ascontiguousarray(array, dtype=NUMPY_DTYPES[dtype]).view(np.uint8)


def _u8(values: list[int] | torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.uint8).reshape(-1)


def _varint(value: int) -> bytes:
    """A scalar field's varint (a count, a block size, levels, a rank)."""
    if type(value) is int and 0 <= value < 1 << 64:
        return varint_bytes(value)
    return encode_varints(np.array([value], dtype=np.uint64)).tobytes()  # numpy's conversion, its errors


def _body(payload: Payload) -> list[Part]:
    if isinstance(payload, SparsePayload):  # first: the kind of nearly every large tensor
        dtype = payload.values.dtype
        return [bytes((SPARSE, DTYPE_CODES[dtype])), encode_indices(payload.indices.numpy(), payload.numel),
                _floats(payload.values, dtype)]
    if isinstance(payload, DensePayload):
        dtype = payload.values.dtype
        return [bytes((DENSE, DTYPE_CODES[dtype])), _floats(payload.values, dtype)]
    if isinstance(payload, SignPayload):
        return [bytes((SIGN,)), _floats([payload.pos_scale, payload.neg_scale]), _u8(payload.signs)]
    if isinstance(payload, VotePayload):
        return [bytes((VOTE,)), _floats([payload.scale]), _u8(payload.signs)]
    if isinstance(payload, TernaryPayload):
        return [bytes((TERNARY,)), _floats([payload.scale]), _u8(payload.trits)]
    if isinstance(payload, QuantizedPayload):
        return [bytes((QSGD,)), _varint(payload.levels), _varint(payload.bucket_size), _floats(payload.norms),
                _u8(payload.codes)]
    if isinstance(payload, NaturalPayload):
        return [bytes((NATURAL,)), _u8(payload.exponents), _u8(payload.signs)]
    if isinstance(payload, LowRankPayload):
        dtype = payload.p.dtype
        return [bytes((LOWRANK, DTYPE_CODES[dtype])), _varint(payload.p.shape[1]), _floats(payload.p, dtype),
                _floats(payload.q, dtype)]
    if isinstance(payload, SparseTernaryPayload):
        numel = math.prod(payload.shape)
        return [bytes((STC,)), _floats([payload.scale]), encode_indices(payload.indices.numpy(), numel),
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


def _code_bytes(coded: Coded) -> Part:
    if coded.encoding in ("fp32", "fp16"):
        return _floats(coded.codes, torch.float32 if coded.encoding == "fp32" else torch.float16)
    if coded.encoding == "int8":
        return np.ascontiguousarray(coded.codes.to(torch.int8).numpy()).view(np.uint8)
    if coded.encoding == "int4":
        nibbles = coded.codes.to(torch.int8).numpy().view(np.uint8) & 0x0F
        if nibbles.size % 2:
            nibbles = np.concatenate((nibbles, np.zeros(1, dtype=np.uint8)))
        return nibbles[0::2] | (nibbles[1::2] << 4)
    return np.packbits(coded.codes.numpy().astype(np.uint8), bitorder="little")  # sign bits


def _body_v3(payload: Payload, values: str | None, block: int) -> list[Part]:
    """Version 3 bodies: sparse and stc with a Golomb–Rice index block, sparse values encoded;
    every other kind as in version 1."""
    if isinstance(payload, SparsePayload):
        coded = _coded(payload, values, block)
        parts: list[Part] = [bytes((SPARSE, ENCODING_CODES[coded.encoding])), encode_rice(payload.indices.numpy(), payload.numel)]
        if payload.indices.numel() == 0:
            return parts
        if coded.encoding in SCALED:
            parts += [_varint(coded.block), _floats(coded.scales)]
        return [*parts, _code_bytes(coded)]
    if isinstance(payload, SparseTernaryPayload):
        return [bytes((STC,)), _floats([payload.scale]),
                encode_rice(payload.indices.numpy(), math.prod(payload.shape)), _u8(payload.signs)]
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
    parts: list[Part] = [bytes((version,))]
    for payload in payloads.values():
        if not _on_host(payload):
            payload = payload_to(payload, "cpu")  # a payload made on a GPU is written from the host
        parts.extend(_body_v3(payload, values, block) if version == VERSION_V3 else _body(payload))
    # one copy of every part, views of the payloads' own memory included
    return b"".join(part if isinstance(part, bytes) else part.data for part in parts)


def _on_host(payload: Payload) -> bool:
    """Whether every tensor of ``payload`` is in CPU memory (``payload_to(payload, "cpu")`` would
    return it as it is)."""
    return all(value.device.type == "cpu" for value in payload.__dict__.values() if isinstance(value, torch.Tensor))


class _Reader:
    """The blob and a read position: ``data`` (uint8 array) for the blocks and arrays, ``raw`` (the
    same bytes) for the one-byte and varint fields, read without numpy."""

    def __init__(self, data: np.ndarray, name: str = "", raw: bytes | memoryview | None = None) -> None:
        self.data, self.pos, self.name = data, 0, name
        self.raw = data.data if raw is None else raw
        self.size = int(data.size)

    def take(self, count: int) -> np.ndarray:
        if count < 0 or self.pos + count > self.size:
            raise CodecError("truncated", f"{self.name}: needs {count} bytes at offset {self.pos}")
        chunk = self.data[self.pos : self.pos + count]
        self.pos += count
        return chunk

    def byte(self) -> int:
        """One byte field (a kind, a dtype or encoding code), as ``int(take(1)[0])``."""
        if self.pos >= self.size:
            raise CodecError("truncated", f"{self.name}: needs 1 bytes at offset {self.pos}")
        value = self.raw[self.pos]
        self.pos += 1
        return int(value)

    def varint(self) -> int:
        try:
            value, used = read_varint(self.raw, self.pos)
        except VarintError as err:
            raise CodecError("bad-varint", f"{self.name}: {err}") from None
        except IndexCodingError as err:
            raise CodecError("truncated", f"{self.name}: {err}") from None
        self.pos += used
        return value

    def float_array(self, count: int, dtype: torch.dtype = torch.float32) -> np.ndarray:
        """``count`` finite values (a copy in native byte order, numpy), else ``non-finite``."""
        size = 4 if dtype == torch.float32 else 2
        values = self.take(count * size).view(NUMPY_DTYPES[dtype]).astype(NUMPY_DTYPES[dtype])
        if not np.isfinite(values).all():
            raise CodecError("non-finite", f"{self.name} holds NaN or Inf")
        return values

    def floats(self, count: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.from_numpy(self.float_array(count, dtype))

    def scale_array(self, count: int) -> np.ndarray:
        values = self.float_array(count)
        if (values < 0).any():
            raise CodecError("negative-scale", f"{self.name} has a negative scale")
        return values

    def scales(self, count: int) -> list[float]:
        return [float(v) for v in self.scale_array(count).tolist()]

    def dtype(self) -> torch.dtype:
        code = self.byte()
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

    def bits(self, n: int) -> torch.Tensor:
        """``n`` packed bits (``packed_len(n)`` bytes) whose padding bits are zero, as
        ``packed(packed_len(n), lambda b: unpack_bits(b, n))`` checks them, without unpacking."""
        data = self.take(packed_len(n))
        if n % 8 and int(data[-1]) >> (n % 8):
            raise CodecError("bad-bits", f"{self.name}: padding bits are not zero")
        return torch.from_numpy(data.copy())


def _decode_one(r: _Reader, kind: int, shape: tuple[int, ...]) -> Payload:
    n = math.prod(shape)
    if kind == SPARSE:
        dtype = r.dtype()
        indices = r.indices(n)
        return SparsePayload(indices=indices, values=r.floats(indices.numel(), dtype), shape=shape)
    if kind == DENSE:
        dtype = r.dtype()
        return DensePayload(values=r.floats(n, dtype), shape=shape)
    if kind in (SIGN, VOTE):
        scales = r.scales(2 if kind == SIGN else 1)
        signs = r.bits(n)
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
        norms = torch.from_numpy(r.scale_array(-(-n // bucket)))
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
        signs = r.bits(n)
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
        return SparseTernaryPayload(indices=indices, signs=r.bits(indices.numel()), scale=scale, shape=shape)
    raise CodecError("bad-kind", f"{r.name}: unknown payload kind {kind}")


def _decode_sparse_v3(r: _Reader, shape: tuple[int, ...]) -> SparsePayload:
    code = r.byte()
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
    scales = torch.from_numpy(r.scale_array(block_count(k, block)))
    raw = r.take(code_bytes(encoding, k))
    if encoding == "sign":
        try:
            codes = unpack_bits(raw, k).to(torch.uint8)
        except PackingError as err:
            raise CodecError("bad-bits", f"{r.name}: {err}") from None
    else:
        if encoding == "int4":
            nibbles = np.stack((raw & 0x0F, raw >> 4), axis=1).reshape(-1)
            if nibbles[k:].any():
                raise CodecError("bad-bits", f"{r.name}: int4 padding nibble set")
            raw = nibbles[:k]
            raw = np.where(raw >= 8, raw.astype(np.int16) - 16, raw).astype(np.int8)  # 4-bit two's complement
        signed = raw.view(np.int8)
        if ((signed < -LEVELS[encoding]) | (signed > LEVELS[encoding])).any():  # −128 (int8), −8 (int4)
            raise CodecError("bad-levels", f"{r.name}: an {encoding} code outside ±{LEVELS[encoding]}")
        codes = torch.from_numpy(signed.copy())
    values = dequantize(codes, scales, encoding, block)
    if not np.isfinite(values.numpy()).all():  # a finite scale near the f32 maximum times a code can overflow
        raise CodecError("non-finite", f"{r.name}: code x scale overflows")
    return CodedSparsePayload(indices=indices, values=values, shape=shape, encoding=encoding, block=block,
                              codes=codes, scales=scales)


def _decode_one_v3(r: _Reader, kind: int, shape: tuple[int, ...]) -> Payload:
    if kind == SPARSE:
        return _decode_sparse_v3(r, shape)
    if kind == STC:
        (scale,) = r.scales(1)
        indices = r.rice(math.prod(shape))
        return SparseTernaryPayload(indices=indices, signs=r.bits(indices.numel()), scale=scale, shape=shape)
    return _decode_one(r, kind, shape)


def _check_levels(codes: torch.Tensor, levels: int, name: str) -> None:
    if codes.numel() and int(codes.max()) > 2 * levels:
        raise CodecError("bad-levels", f"{name}: code above 2·levels")


def decode_bytes(data: bytes | np.ndarray, shapes: dict[str, tuple[int, ...]]) -> dict[str, Payload]:
    """Validate and decode an update blob (version 1 or 3) against the model's parameter ``shapes``."""
    if isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1 and data.flags.c_contiguous:
        r = _Reader(data)  # (npy_bytes's array) read in place: every decoded tensor is a copy
    else:
        raw = data if type(data) is bytes else bytes(data)
        r = _Reader(np.frombuffer(raw, dtype=np.uint8), raw=raw)
    version = r.byte() if r.size else -1
    if version not in VERSIONS:
        raise CodecError("bad-version", f"format version {version}, expected one of {VERSIONS}")
    decode_one = _decode_one_v3 if version == VERSION_V3 else _decode_one
    payloads: dict[str, Payload] = {}
    for name, shape in shapes.items():
        r.name = name
        payloads[name] = decode_one(r, r.byte(), tuple(shape))
    if r.pos != r.size:
        raise CodecError("trailing-bytes", f"{r.size - r.pos} bytes after the last parameter")
    return payloads
