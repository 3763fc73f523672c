"""The fast wire codec is the codec it replaced, bit for bit: tests/codec_reference.py keeps the
implementation before the per-message cost was cut (varint, Golomb–Rice, blob, update record), and
every test here holds the live one to it: the same blob bytes and record for many seeded updates
(version 1 and v3 in every value encoding, fp16, empty tensors, dense payloads, every payload kind,
indices at 0 and numel − 1, models of hundreds of small tensors), the same decoded payloads, and for
cut, edited and hand-made hostile blobs the same refusal: exception type, reason and message."""

from __future__ import annotations

import io
import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord

import tests.codec_reference as ref
from fedgc.compress import compressor_names
from fedgc.compress.base import CompressionContext
from fedgc.compress.config import CompressionConfig
from fedgc.compress.payloads import (
    DensePayload,
    SignPayload,
    SparsePayload,
    SparseTernaryPayload,
)
from fedgc.compress.update import build_compression, compress_update
from fedgc.flower.update_record import BLOB_KEY, decode_update, encode_update, npy_bytes, npy_header
from fedgc.wire import golomb, varint
from fedgc.wire.codec import decode_bytes, encode_bytes
from fedgc.wire.quantize import ENCODINGS
from tests.wire_v3_cases import REJECT_CASES

VECTORS = Path(__file__).parent / "vectors"
V3_ARGS = [(None, 0), ("fp32", 0), ("fp16", 0), ("int8", 0), ("int8", 4), ("int4", 0), ("int4", 1000), ("sign", 0),
           ("sign", 4)]
assert {e for e, _ in V3_ARGS} >= set(ENCODINGS)


def same_payload(a, b) -> None:
    assert type(a) is type(b)
    for field in fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape, field.name
            assert x.numpy().tobytes() == y.numpy().tobytes(), field.name  # bits: −0.0 and 0.0 differ
        else:
            assert type(x) is type(y) and x == y, field.name


def same_outcome(decode_new, decode_old, *args) -> None:
    """Both decoders give the same payloads, or both refuse with the same error, reason and message."""
    try:
        expected = decode_old(*args)
    except Exception as err:  # noqa: BLE001 — whatever the reference raised, the live codec raises
        with pytest.raises(type(err)) as caught:
            decode_new(*args)
        assert type(caught.value) is type(err) and str(caught.value) == str(err)
        assert getattr(caught.value, "reason", None) == getattr(err, "reason", None)
        return
    got = decode_new(*args)
    if isinstance(expected, dict):
        assert list(got) == list(expected)
        for key in expected:
            same_payload(got[key], expected[key])
    elif isinstance(expected, np.ndarray):
        assert np.array_equal(got, expected) and got.dtype == expected.dtype
    else:  # (indices or values, bytes used)
        assert np.array_equal(got[0], expected[0]) and got[0].dtype == expected[0].dtype and got[1] == expected[1]


def sparse(n: int, k: int, g: torch.Generator, dtype: torch.dtype = torch.float32, ends: bool = False) -> SparsePayload:
    picked = torch.randperm(n, generator=g)[:k].sort().values
    if ends and k >= 2:  # the first and the last entry of the tensor
        picked = torch.cat((torch.tensor([0]), picked[1:-1], torch.tensor([n - 1]))).unique()
    return SparsePayload(indices=picked, values=torch.randn(picked.numel(), generator=g).to(dtype), shape=(n,))


def handmade(seed: int, tensors: int = 12) -> tuple[dict, dict]:
    """Sparse payloads of every density (empty, one entry, 0 and numel − 1, dense patterns that pick
    the bitmap), fp32 and fp16 values, dense payloads, sign and stc: one model."""
    g = torch.Generator().manual_seed(seed)
    payloads: dict = {}
    for t in range(tensors):
        n = int(torch.randint(1, 5000, (1,), generator=g))
        choice = (seed + t) % 8
        dtype = torch.float16 if (seed + t) % 3 == 0 else torch.float32
        if choice == 0:
            payloads[f"p{t}"] = SparsePayload(indices=torch.zeros(0, dtype=torch.int64),
                                              values=torch.zeros(0, dtype=dtype), shape=(n,))
        elif choice == 1:
            payloads[f"p{t}"] = sparse(n, max(2, n // 3), g, dtype, ends=True)  # dense pattern: bitmap
        elif choice == 2:
            payloads[f"p{t}"] = DensePayload(values=torch.randn(n, generator=g).to(dtype), shape=(n,))
        elif choice == 3:
            payloads[f"p{t}"] = SparseTernaryPayload(indices=sparse(n, max(1, n // 50), g).indices,
                                                     signs=torch.zeros(0, dtype=torch.uint8), scale=0.5, shape=(n,))
            k = payloads[f"p{t}"].indices.numel()
            signs = torch.randint(0, 256, ((k + 7) // 8,), generator=g, dtype=torch.uint8)
            if k % 8:
                signs[-1] &= (1 << (k % 8)) - 1
            payloads[f"p{t}"] = SparseTernaryPayload(indices=payloads[f"p{t}"].indices, signs=signs, scale=0.5,
                                                     shape=(n,))
        elif choice == 4:
            signs = torch.randint(0, 256, ((n + 7) // 8,), generator=g, dtype=torch.uint8)
            if n % 8:
                signs[-1] &= (1 << (n % 8)) - 1
            payloads[f"p{t}"] = SignPayload(signs=signs, pos_scale=0.25, neg_scale=1.5, shape=(n,))
        elif choice == 5:
            payloads[f"p{t}"] = sparse(n, 1, g, dtype)
        else:
            payloads[f"p{t}"] = sparse(n, max(1, n // 100), g, dtype, ends=choice == 6)
    return payloads, {name: p.shape for name, p in payloads.items()}


def compressed(name: str, seed: int, value_dtype: str) -> tuple[dict, dict]:
    """A real compressor's payloads for a small model (every payload kind comes from one of them)."""
    g = torch.Generator().manual_seed(seed)
    shapes = {"w": (12, 30), "b": (7,), "c": (3, 4, 5), "big": (2000,)}
    update = {k: torch.randn(s, generator=g) for k, s in shapes.items()}
    cfg = CompressionConfig(name=name, density=0.05, value_dtype=value_dtype, dense_small_tensors=False,
                            threshold={"threshold": 1.5}, qsgd={"qsgd_levels": 3, "qsgd_bucket_size": 8})
    compressor, memory = build_compression(cfg)
    ctx = CompressionContext(density=0.05, generator=g, memory=memory)
    out = compress_update(update, compressor, memory, ctx, dense_small_tensors=False, value_dtype=value_dtype)
    return out.payloads, shapes


def many_small(seed: int) -> tuple[dict, dict]:
    """A model of 300 small tensors, as a deep net's biases and norms (DGC-like: sparse matrices, dense
    vectors)."""
    g = torch.Generator().manual_seed(seed)
    payloads: dict = {}
    for t in range(300):
        n = int(torch.randint(1, 700, (1,), generator=g))
        payloads[f"layer{t}"] = (DensePayload(values=torch.randn(n, generator=g), shape=(n,)) if t % 3 == 0
                                 else sparse(n, max(1, n // 100), g, ends=t % 5 == 0))
    return payloads, {name: p.shape for name, p in payloads.items()}


SPARSE_VALUES = {"topk", "randomk", "threshold", "dgc"}  # the compressors that take value_dtype int8, int4, sign
UPDATES = ([handmade(seed) for seed in range(12)] + [many_small(seed) for seed in range(2)]
           + [compressed(name, seed, dtype) for name in compressor_names() for seed in (0, 1)
              for dtype in ("fp32", "fp16", "int8", "int4", "sign") if dtype in ("fp32", "fp16") or name in SPARSE_VALUES])


@pytest.mark.parametrize("index", range(len(UPDATES)))
def test_blobs_and_decodes_are_the_reference_ones(index):
    payloads, shapes = UPDATES[index]
    many = len(payloads) > 100  # a decode costs ~100 µs a tensor in the reference: fewer cases
    cases = [(1, None, 0)] + [(3, values, block) for values, block in (V3_ARGS[3:5] if many else V3_ARGS)]
    for version, values, block in cases:
        blob = encode_bytes(payloads, version=version, values=values, block=block)
        assert blob == ref.encode_bytes(payloads, version=version, values=values, block=block), (version, values)
        same_outcome(decode_bytes, ref.decode_bytes, blob, shapes)
        # a cut blob's refusal, and what an edited byte becomes, at a few places
        for cut in np.unique(np.linspace(0, len(blob) - 1, 4 if many else 10).astype(int)):
            same_outcome(decode_bytes, ref.decode_bytes, blob[:cut], shapes)
            edited = bytearray(blob)
            edited[cut] ^= 0x80 if cut % 2 else 0xFF
            same_outcome(decode_bytes, ref.decode_bytes, bytes(edited), shapes)
        same_outcome(decode_bytes, ref.decode_bytes, blob + b"\0", shapes)


@pytest.mark.parametrize("index", range(0, len(UPDATES), 3))
def test_update_record_is_the_reference_one(index):
    payloads, shapes = UPDATES[index]
    record, expected = encode_update(payloads), ref.encode_update(payloads)
    if isinstance(record, ConfigRecord):  # a v3 blob in the compact form (tests/test_update_framing.py)
        assert list(record) == [BLOB_KEY] and record[BLOB_KEY] == ref.npy_bytes(expected["update"]).tobytes()
        assert record[BLOB_KEY][0] == 3
        same_outcome(lambda _, s: decode_update(record, s), ref.decode_update, expected, shapes)
        return
    (key,) = list(record)
    got, want = record[key], expected[key]
    assert list(record) == list(expected)
    assert (got.dtype, got.shape, got.stype, got.data) == (want.dtype, want.shape, want.stype, want.data)
    same_outcome(decode_update, ref.decode_update, record, shapes)
    assert np.array_equal(npy_bytes(got), ref.npy_bytes(want))


def test_npy_header_is_what_numpy_writes():
    for n in (0, 1, 7, 63, 64, 1000, 99_999, 10**7):
        stream = io.BytesIO()
        np.save(stream, np.zeros(n, dtype=np.uint8), allow_pickle=False)
        assert stream.getvalue()[: len(npy_header(n))] == npy_header(n)
        assert len(stream.getvalue()) == len(npy_header(n)) + n


def _array(data: bytes, shape: tuple[int, ...], dtype: str = "uint8", stype: str = "numpy.ndarray") -> ArrayRecord:
    return ArrayRecord({"update": Array(dtype=dtype, shape=shape, stype=stype, data=data)})


def test_hostile_records_are_refused_as_before():
    payloads, shapes = UPDATES[0]
    blob = encode_bytes(payloads)
    good = Array(np.frombuffer(blob, dtype=np.uint8)).data
    header = npy_header(len(blob))
    fortran = header.replace(b"'fortran_order': False", b"'fortran_order': True ")
    big_endian = io.BytesIO()
    np.save(big_endian, np.frombuffer(blob, dtype=np.uint8).astype(">u2"), allow_pickle=False)
    cases = [
        _array(good, (len(blob),)),
        _array(good + b"\0", (len(blob),)),  # a byte after the array
        _array(good[:-1], (len(blob),)),  # cut
        _array(good, (len(blob) + 1,)),  # the Array's shape says one more
        _array(good, (len(blob) - 1,)),
        _array(good, (len(blob),), stype="torch.Tensor"),
        _array(fortran + blob, (len(blob),)),  # a header numpy reads, not the one it writes
        _array(header.replace(b"|u1", b"<i1") + blob, (len(blob),)),
        _array(big_endian.getvalue(), (len(blob),)),
        _array(b"\x93NUMPY\x01\x00" + b"\xff" * 20, (len(blob),)),
        _array(b"", (0,)),
        _array(npy_header(0), (0,)),  # an empty blob: bad-version
        _array(good, (len(blob), 1)),
        _array(good, (10**30,)),  # a shape no data holds: no header is written for it
        _array(good, (-1,)),
        _array(good, (len(blob),), dtype="int8"),
    ]
    for record in cases:
        same_outcome(decode_update, ref.decode_update, record, shapes)


def _vector_cases():
    """Every blob of tests/vectors (valid and rejection vectors, version 1 and v3) and of
    tests/wire_v3_cases.py, with its shapes."""
    for path in sorted(VECTORS.rglob("*.json")):
        data = json.loads(path.read_text())
        for case in data.get("cases", [data]) if isinstance(data, dict) else []:
            if isinstance(case, dict) and isinstance(case.get("hex"), str) and isinstance(case.get("shapes"), dict):
                yield path.name, {k: tuple(v) for k, v in case["shapes"].items()}, bytes.fromhex(case["hex"])
    for name, _reason, shapes, data, _rule in REJECT_CASES:
        yield name, {k: tuple(v) for k, v in shapes.items()}, data


def test_hand_made_hostile_blobs_are_refused_as_before():
    cases = list(_vector_cases())
    assert len(cases) > 60
    for _name, shapes, data in cases:
        same_outcome(decode_bytes, ref.decode_bytes, data, shapes)
        same_outcome(decode_bytes, ref.decode_bytes, np.frombuffer(data, dtype=np.uint8), shapes)


def test_varints_are_the_reference_ones():
    rng = np.random.default_rng(0)
    tops = [0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, 2**16, 2**32 - 1, 2**32, 2**63, 2**64 - 1]
    for top in tops:
        values = np.concatenate((np.array([top], dtype=np.uint64),
                                 rng.integers(0, top, 300, dtype=np.uint64, endpoint=True)))
        assert np.array_equal(varint.encode_varints(values), ref.encode_varints(values))
        for value in values[:20].tolist():
            assert varint.varint_bytes(value) == ref.encode_varints(np.array([value], dtype=np.uint64)).tobytes()
        blob = ref.encode_varints(values)
        assert np.array_equal(varint.decode_varints(blob), ref.decode_varints(blob))
    assert varint.encode_varints(np.zeros(0, dtype=np.uint64)).size == 0
    for data in [b"", b"\x80", b"\x80" * 9, b"\x80" * 10, b"\x80" * 11 + b"\x01", b"\xff" * 9 + b"\x01",
                 b"\xff" * 9 + b"\x02", b"\x05\x80", b"\xff" * 9 + b"\x7f\x00"]:
        array = np.frombuffer(data, dtype=np.uint8)
        for count in (1, 2):
            same_outcome(varint.read_varints, ref.read_varints, array, count)
        if data:
            same_outcome(varint.decode_varints, ref.decode_varints, array)


def test_index_blocks_are_the_reference_ones():
    rng = np.random.default_rng(1)
    for trial in range(300):
        n = int(rng.integers(1, 20_000))
        k = int(rng.integers(0, min(n, 3000) + 1)) if trial % 4 else min(n, 5)
        idx = np.sort(rng.choice(n, k, replace=False))
        if trial % 7 == 0 and k:
            idx[0], idx[-1] = 0, n - 1
            idx = np.unique(idx)
        v1 = varint.encode_indices(idx, n)
        assert np.array_equal(v1, ref.encode_indices(idx, n)) and v1.dtype == np.uint8
        b = None if trial % 3 else int(rng.integers(0, golomb.max_rice_parameter(n) + 1))
        v3 = golomb.encode_rice(idx, n, b)
        assert np.array_equal(v3, ref.encode_rice(idx, n, b)) and v3.dtype == np.uint8
        tail = rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8)
        for block, new, old in ((v1, varint.decode_indices, ref.decode_indices),
                                (v3, golomb.decode_rice, ref.decode_rice)):
            data = np.concatenate((block, tail))
            same_outcome(new, old, data, n)
            for cut in rng.integers(0, data.size + 1, 6):
                same_outcome(new, old, data[:cut], n)
            edited = data.copy()
            edited[rng.integers(0, data.size)] = rng.integers(0, 256)
            same_outcome(new, old, edited, n)
            same_outcome(new, old, data, max(1, n // 2))  # indices past a smaller tensor
    for data in (b"\x00", b"\x00\x02\x80\x80", b"\x00\x01" + b"\x80" * 10, b"\x00\x01" + b"\xff" * 9 + b"\x02",
                 b"\x00\x03\x01\x01\x80", b"\x00\x02" + b"\x80" * 12, b"\x01\xff", b"\x02",
                 # a gap past the end, then a bad varint: the first in reading order names the error
                 b"\x00\x02\x07" + b"\x80" * 10 + b"\x01", b"\x00\x03\x00\x09" + b"\xff" * 9 + b"\x02",
                 b"\x00\x02\x01" + b"\xff" * 9 + b"\x02\x00"):
        for n in (1, 4, 16, 1000):
            same_outcome(varint.decode_indices, ref.decode_indices, np.frombuffer(data, dtype=np.uint8), n)


def test_decode_reads_a_uint8_array_in_place_and_copies_what_it_returns():
    payloads, shapes = UPDATES[1]
    blob = np.frombuffer(encode_bytes(payloads, version=3, values="int4"), dtype=np.uint8).copy()
    decoded = decode_bytes(blob, shapes)
    blob[:] = 0  # the decoded payloads own their memory
    expected = ref.decode_bytes(encode_bytes(payloads, version=3, values="int4"), shapes)
    for key, payload in decoded.items():
        same_payload(payload, expected[key])
