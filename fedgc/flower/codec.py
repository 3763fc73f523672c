"""The wire format of a compressed update inside a Flower ``ArrayRecord`` (docs/wire-format.md).

An update is one ``ArrayRecord`` holding one uint8 ``Array`` under ``UPDATE_KEY``: a version byte,
then one entry per model parameter in the model's order (the server's ``shapes``): a kind byte and
that kind's body. Names and shapes are not sent: the server knows the model. One array rather than
one per field because Flower frames every ``Array`` with ~460 bytes of headers and object ids.
Decoding validates every length, bound, code and float against the shapes and raises ``CodecError``.
"""

from __future__ import annotations

import io
import math

import numpy as np
import torch
from flwr.app import Array, ArrayRecord
from flwr.common.constant import SType

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
)
from fedgc.flower.varint import IndexCodingError, decode_indices, encode_indices, encode_varints, read_varints

UPDATE_KEY = "update"
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
    array = torch.as_tensor(values).detach().to(dtype).flatten().numpy()
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
        return [_u8([QSGD]), encode_varints(np.array([payload.levels, payload.bucket_size])),
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
        parts.extend(_body(payload))
    return np.concatenate(parts).tobytes()


def encode_update(payloads: dict[str, Payload]) -> ArrayRecord:
    """``payloads`` must be in the model's parameter order (as ``compress_update`` produces them)."""
    return ArrayRecord({UPDATE_KEY: Array(np.frombuffer(encode_bytes(payloads), dtype=np.uint8).copy())})


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
        levels, bucket = r.varint(), r.varint()
        if not (1 <= levels <= MAX_QSGD_LEVELS and bucket >= 1):
            raise CodecError("bad-levels", f"{r.name}: levels={levels}, bucket={bucket}")
        norms = torch.tensor(r.scales(-(-n // bucket)), dtype=torch.float32)
        width = (2 * levels).bit_length()
        codes = r.packed(packed_len(n, width), lambda b: _check_levels(unpack_uint(b, n, width), levels, r.name))
        return QuantizedPayload(codes=codes, norms=norms, levels=levels, bucket_size=bucket, shape=shape)
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


def decode_update(record: ArrayRecord, shapes: dict[str, tuple[int, ...]]) -> dict[str, Payload]:
    """Validate and decode ``record`` against the model's parameter ``shapes``; raise ``CodecError``."""
    keys = list(record)
    if keys != [UPDATE_KEY]:
        raise CodecError("bad-record", f"expected one array {UPDATE_KEY!r}, got {keys[:4]}")
    array = record[UPDATE_KEY]
    if array.dtype != "uint8" or len(array.shape) != 1:
        raise CodecError("bad-dtype", f"update array is {array.dtype} {array.shape}, expected 1-D uint8")
    try:
        data = array.numpy()
    except (ValueError, TypeError) as err:
        raise CodecError("bad-array", str(err)) from None
    return decode_bytes(data, shapes)


# Client state records ---------------------------------------------------------------------------
# How the ClientApp keeps tensors in ``context.state`` between rounds. A mostly-zero tensor (a sent
# DGC update kept as pending: 1% of its entries) is stored as its nonzero entries; every other tensor
# as it is. Lossless: unpacking gives the same bits (a -0.0 or NaN counts as nonzero). NumPy has
# no bfloat16, so a bfloat16 tensor is stored as its int16 bit pattern under ``STATE_BF16``.
STATE_INDICES, STATE_VALUES, STATE_SHAPE = "sparse-indices/", "sparse-values/", "sparse-shape/"
STATE_BF16 = "bfloat16/"
_RESERVED = (STATE_INDICES, STATE_VALUES, STATE_SHAPE, STATE_BF16)
_SAME_SIZE_INT = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}


_NPY_HEADERS: dict[tuple[str, tuple[int, ...]], bytes] = {}  # np.save's header per (dtype, shape)


def _npy_header(array: np.ndarray) -> bytes:
    key = (array.dtype.str, array.shape)
    header = _NPY_HEADERS.get(key)
    if header is None:
        buffer = io.BytesIO()
        np.lib.format.write_array_header_1_0(buffer, np.lib.format.header_data_from_array_1_0(array))
        header = buffer.getvalue()
        if len(_NPY_HEADERS) < 4096:
            _NPY_HEADERS[key] = header
    return header


def _array(array: np.ndarray) -> Array:
    """``Array(array)``, byte for byte the same (np.save's format 1.0), with one copy of the data and
    without np.save's per-call work."""
    array = array if array.flags.c_contiguous else np.ascontiguousarray(array)  # (keeps a 0-d array 0-d)
    data = b"".join((_npy_header(array), array.data.cast("B") if array.ndim and array.size else array.tobytes()))
    return Array(dtype=str(array.dtype), shape=tuple(array.shape), stype=SType.NUMPY, data=data)


def _tensor(array: Array) -> torch.Tensor:
    """``torch.from_numpy(array.numpy())``: a writable copy; skips np.load's header parsing when the
    header is one ``_array`` wrote."""
    dtype = np.dtype(array.dtype)
    header = _NPY_HEADERS.get((dtype.str, tuple(array.shape)))  # only headers this module wrote
    data = array.data
    if header is None or not data.startswith(header) or len(data) != len(header) + dtype.itemsize * math.prod(array.shape):
        return torch.from_numpy(array.numpy())
    values = np.frombuffer(data, dtype=dtype, offset=len(header)).reshape(array.shape).copy()
    return torch.from_numpy(values)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` flat, viewed as integers of the same size (nonzero exactly where a bit is set)."""
    flat = tensor.reshape(-1)
    if flat.is_floating_point() and flat.element_size() in _SAME_SIZE_INT:
        flat = flat.view(_SAME_SIZE_INT[flat.element_size()])
    return flat


def pack_state(tensors: dict[str, torch.Tensor]) -> ArrayRecord:
    """``tensors`` as an ``ArrayRecord`` for ``context.state``: sparse where that is under a third of dense."""
    arrays: dict[str, Array] = {}
    for name, tensor in tensors.items():
        if name.startswith(_RESERVED):
            raise ValueError(f"tensor name {name!r} starts with a reserved prefix")
        tensor = tensor.detach()
        if tensor.dtype == torch.bfloat16:
            arrays[STATE_BF16 + name] = _array(tensor.contiguous().view(torch.int16).numpy())
            continue
        if tensor.is_floating_point() and tensor.numel() >= 64:
            bits = _bits(tensor)
            index_dtype = torch.int32 if tensor.numel() < 2**31 else torch.int64
            sparse_bytes = int(torch.count_nonzero(bits)) * (tensor.element_size() + index_dtype.itemsize)
            if 3 * sparse_bytes < tensor.numel() * tensor.element_size():
                nonzero = bits.nonzero().view(-1)
                arrays[STATE_INDICES + name] = _array(nonzero.to(index_dtype).numpy())
                arrays[STATE_VALUES + name] = _array(tensor.reshape(-1)[nonzero].numpy())
                arrays[STATE_SHAPE + name] = _array(np.asarray(tensor.shape, dtype=np.int64))
                continue
        arrays[name] = _array(tensor.contiguous().numpy())
    return ArrayRecord(arrays)


def unpack_state(record: ArrayRecord | None) -> dict[str, torch.Tensor]:
    """The tensors ``pack_state`` stored, in their original order, dense."""
    if record is None:
        return {}
    tensors: dict[str, torch.Tensor] = {}
    for key in record:
        if key.startswith((STATE_VALUES, STATE_SHAPE)):
            continue
        if key.startswith(STATE_BF16):
            tensors[key.removeprefix(STATE_BF16)] = _tensor(record[key]).view(torch.bfloat16)
        elif key.startswith(STATE_INDICES):
            name = key.removeprefix(STATE_INDICES)
            values = _tensor(record[STATE_VALUES + name])
            shape = tuple(int(d) for d in _tensor(record[STATE_SHAPE + name]).tolist())
            dense = torch.zeros(math.prod(shape), dtype=values.dtype)
            dense[_tensor(record[key]).to(torch.int64)] = values
            tensors[name] = dense.reshape(shape)
        else:
            tensors[key] = _tensor(record[key])
    return tensors
