"""The update blob: the cross-language wire format of a compressed update (docs/wire-format.md).

A blob is a version byte, then one entry per model parameter in the key order of the ``arrays``
record of the train message (the server's ``shapes``, buffers included): a kind byte and that
kind's body. Names and shapes are not sent: the server knows the model. Decoding reads and checks
one field at a time, so the first failing check names the reason (``fedgc.wire.reasons``; the
precedence is in docs/wire-format.md), and raises ``CodecError``. No Flower here:
``fedgc.flower.update_record`` puts the blob into one ``ArrayRecord``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fedgc.compress.bits import PackingError, packed_len
from fedgc.compress.payloads import (
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
from fedgc.wire.varint import (
    IndexCodingError,
    IndexTruncated,
    VarintError,
    decode_indices,
    encode_indices,
    encode_varints,
    read_varints,
)

VERSION = 1
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


def _floats(values: torch.Tensor | list[float], dtype: torch.dtype = torch.float32) -> np.ndarray:
    array = torch.as_tensor(values, device="cpu").detach().to(dtype).flatten().numpy()
    return np.frombuffer(array.astype(NUMPY_DTYPES[dtype]).tobytes(), dtype=np.uint8)


def _u8(values) -> np.ndarray:
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


def encode_bytes(payloads: dict[str, Payload]) -> bytes:
    """The update blob: version byte, then each payload's kind and body in the order given."""
    parts = [_u8([VERSION])]
    for payload in payloads.values():
        parts.extend(_body(payload_to(payload, "cpu")))  # a payload made on a GPU is written from the host
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
        try:
            indices, used = decode_indices(self.data[self.pos :], numel)
        except VarintError as err:
            raise CodecError("bad-varint", f"{self.name}: {err}") from None
        except IndexTruncated as err:
            raise CodecError("truncated", f"{self.name}: {err}") from None
        except IndexCodingError as err:
            raise CodecError("bad-indices", f"{self.name}: {err}") from None
        self.pos += used
        return torch.from_numpy(indices)

    def packed(self, count: int, unpack) -> torch.Tensor:
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
        payload = LowRankPayload(p=p, q=r.floats(cols * rank, dtype).reshape(cols, rank), shape=shape)
        if not torch.isfinite(payload.to_dense()).all():  # finite factors can still overflow P·Qᵀ
            raise CodecError("non-finite", f"{r.name}: P·Qᵀ overflows")
        return payload
    if kind == STC:
        (scale,) = r.scales(1)
        indices = r.indices(n)
        k = indices.numel()
        signs = r.packed(packed_len(k), lambda b: unpack_bits(b, k))
        return SparseTernaryPayload(indices=indices, signs=signs, scale=scale, shape=shape)
    raise CodecError("bad-kind", f"{r.name}: unknown payload kind {kind}")


def _check_levels(codes: torch.Tensor, levels: int, name: str) -> None:
    if codes.numel() and int(codes.max()) > 2 * levels:
        raise CodecError("bad-levels", f"{name}: code above 2·levels")


def decode_bytes(data: bytes | np.ndarray, shapes: dict[str, tuple[int, ...]]) -> dict[str, Payload]:
    """Validate and decode an update blob against the model's parameter ``shapes``."""
    r = _Reader(np.frombuffer(bytes(data), dtype=np.uint8))
    version = int(r.take(1)[0]) if r.data.size else -1
    if version != VERSION:
        raise CodecError("bad-version", f"format version {version}, expected {VERSION}")
    payloads: dict[str, Payload] = {}
    for name, shape in shapes.items():
        r.name = name
        payloads[name] = _decode_one(r, int(r.take(1)[0]), tuple(shape))
    if r.pos != r.data.size:
        raise CodecError("trailing-bytes", f"{r.data.size - r.pos} bytes after the last parameter")
    return payloads
