"""Wire format v3 test vectors (tests/vectors/v3/), written by ``python -m tests.make_vectors`` and
checked by tests/test_wire_v3.py; docs/wire-format.md, "Format v3".

* ``tests/vectors/v3/<name>.json``: valid v3 blobs: ``shapes``, ``hex``, ``decoded`` (each parameter's
  dense f32 values, from the bytes by the spec's rules), and ``input`` + ``encode``: the sparse
  payloads (``indices``, f32 ``values`` before quantization) and the ``values``/``block`` arguments of
  ``encode_bytes(..., version=3)`` that give ``hex`` exactly.
* ``tests/vectors/v3/reject.json``: malformed v3 blobs made by hand and the reason a decoder must give.
"""

from __future__ import annotations

import numpy as np
import torch

from fedgc.compress.payloads import DensePayload, SparsePayload, SparseTernaryPayload

V11 = bytes([0x80] * 10 + [0x01])  # an 11-byte varint
MAX64 = bytes([0xFF] * 9 + [0x01])  # 2**64 − 1


def f32(*values: float) -> bytes:
    return np.array(values, dtype="<f4").tobytes()


def _sparse(n: int, count: int, seed: int, scale: float = 1.0) -> SparsePayload:
    g = torch.Generator().manual_seed(seed)
    indices = torch.randperm(n, generator=g)[:count].sort().values
    values = (torch.randn(count, generator=g) * scale).mul(64).round().div(64)  # short decimals, exact in f32
    return SparsePayload(indices=indices, values=values, shape=(n,))


def valid_cases() -> list[tuple[str, dict, str | None, int]]:
    """(name, payloads, values, block): each gives one vector."""
    w = _sparse(300, 9, 1, 4.0)
    wide = _sparse(4000, 21, 2)
    empty = SparsePayload(indices=torch.zeros(0, dtype=torch.int64), values=torch.zeros(0), shape=(5,))
    dense = DensePayload(values=torch.tensor([0.5, -1.25, 3.0]), shape=(3,))
    stc = SparseTernaryPayload(indices=torch.tensor([2, 40, 41, 77]), signs=torch.tensor([0b0101], dtype=torch.uint8),
                               scale=0.75, shape=(8, 10))
    every = {"w": w, "b": _sparse(12, 3, 3), "e": empty, "d": dense}
    return [
        ("sparse_fp32", every, "fp32", 0),
        ("sparse_fp16", every, "fp16", 0),
        ("sparse_int8", every, "int8", 0),
        ("sparse_int4", every, "int4", 0),
        ("sparse_sign", every, "sign", 0),
        ("sparse_int8_block4", {"w": w, "wide": wide}, "int8", 4),  # 9 values: blocks of 4, 4, 1
        ("sparse_int4_block8", {"wide": wide}, "int4", 8),
        ("sparse_sign_block5", {"wide": wide}, "sign", 5),
        ("sparse_dense_gaps", {"x": _sparse(40, 30, 4)}, "fp32", 0),  # mean gap < 1: b = 0
        ("stc", {"m": stc}, None, 0),
    ]


def payload_input(payloads: dict) -> dict:
    out = {}
    for key, p in payloads.items():
        if isinstance(p, SparsePayload):
            out[key] = {"kind": "sparse", "indices": p.indices.tolist(), "values": p.values.tolist()}
        elif isinstance(p, SparseTernaryPayload):
            out[key] = {"kind": "stc", "indices": p.indices.tolist(), "signs": p.signs.tolist(), "scale": p.scale}
        else:
            out[key] = {"kind": "dense", "values": p.values.tolist()}
    return out


def payloads_from_input(data: dict, shapes: dict) -> dict:
    out = {}
    for key, p in data.items():
        shape = tuple(shapes[key])
        if p["kind"] == "sparse":
            out[key] = SparsePayload(indices=torch.tensor(p["indices"], dtype=torch.int64),
                                     values=torch.tensor(p["values"], dtype=torch.float32), shape=shape)
        elif p["kind"] == "stc":
            out[key] = SparseTernaryPayload(indices=torch.tensor(p["indices"], dtype=torch.int64),
                                            signs=torch.tensor(p["signs"], dtype=torch.uint8), scale=p["scale"],
                                            shape=shape)
        else:
            out[key] = DensePayload(values=torch.tensor(p["values"], dtype=torch.float32), shape=shape)
    return out


N16 = {"x": [16]}
# A sparse entry: kind 1, encoding byte (0 fp32, 1 fp16, 2 int8, 3 int4, 4 sign), varint k, u8 b, stream.
ONE_AT_0 = bytes([1, 0, 0x01])  # k = 1, b = 0, stream: gap 0 (one bit 1)
REJECT_CASES = [  # (name, reason, shapes, bytes, the rule it shows)
    ("v3-version-4", "bad-version", N16, bytes([4, 1, 0, 0]), "version byte is 1 or 3"),
    ("v3-no-kind", "truncated", N16, bytes([3]), "the kind byte is a field"),
    ("v3-kind-9", "bad-kind", N16, bytes([3, 9]), "kind above 8"),
    ("v3-no-encoding", "truncated", N16, bytes([3, 1]), "the encoding byte is a field"),
    ("v3-encoding-5", "bad-dtype", N16, bytes([3, 1, 5, 0]), "value encoding above 4"),
    ("v3-k-cut", "truncated", N16, bytes([3, 1, 0, 0x80]), "k cut by the end of the blob"),
    ("v3-k-11", "bad-varint", N16, bytes([3, 1, 0]) + V11, "k longer than 10 bytes"),
    ("v3-k-17", "bad-indices", N16, bytes([3, 1, 0, 17, 0]) + bytes(8), "k above n"),
    ("v3-k-max", "bad-indices", N16, bytes([3, 1, 0]) + MAX64, "k = 2**64 − 1: bounded before anything is sized by it"),
    ("v3-no-b", "truncated", N16, bytes([3, 1, 0, 1]), "the Rice parameter byte is a field"),
    ("v3-b-5", "bad-indices", N16, bytes([3, 1, 0, 1, 5, 0x01]) + f32(1), "b above floor(log2 n) = 4"),
    ("v3-unary-cut", "truncated", N16, bytes([3, 1, 0, 2, 0, 0x00]),
     "the blob ends before the k-th one bit, within the 16 bits a valid stream may use"),
    ("v3-unary-past-n", "bad-indices", N16, bytes([3, 1, 0, 2, 0, 0x00, 0x00, 0xFF]),
     "no k-th one bit within ((n − k) >> b) + k bits: the gaps run past n"),
    ("v3-gap-past-n", "bad-indices", {"x": [10]}, bytes([3, 1, 0, 2, 2, 0xF9]) + f32(1, 2),
     "gaps 3 and 2·4 + 3: the second index, 15, is ≥ n = 10"),
    ("v3-remainder-cut", "truncated", {"x": [1000]}, bytes([3, 1, 0, 1, 9, 0x01]),
     "quotient bit then a 9-bit remainder: 2 bytes, 1 there"),
    ("v3-stream-padding", "bad-indices", N16, bytes([3, 1, 0, 1, 0, 0x03]) + f32(1), "a padding bit of the stream set"),
    ("v3-fp32-cut", "truncated", N16, bytes([3, 1, 0]) + ONE_AT_0 + f32(1)[:3], "k values of 4 bytes"),
    ("v3-fp32-nan", "non-finite", N16, bytes([3, 1, 0]) + ONE_AT_0 + f32(np.nan), "NaN value"),
    ("v3-no-block", "truncated", N16, bytes([3, 1, 2]) + ONE_AT_0, "the block varint is a field"),
    ("v3-block-11", "bad-varint", N16, bytes([3, 1, 2]) + ONE_AT_0 + V11, "block longer than 10 bytes"),
    ("v3-scale-cut", "truncated", N16, bytes([3, 1, 2, 2, 0, 0x03, 1]) + f32(1) + bytes([1, 1]),
     "block 1, k = 2: two scales"),
    ("v3-scale-nan", "non-finite", N16, bytes([3, 1, 2]) + ONE_AT_0 + bytes([0]) + f32(np.nan) + bytes([1]), "NaN scale"),
    ("v3-scale-inf", "non-finite", N16, bytes([3, 1, 3]) + ONE_AT_0 + bytes([0]) + f32(np.inf) + bytes([1]), "Inf scale"),
    ("v3-scale-negative", "negative-scale", N16, bytes([3, 1, 4]) + ONE_AT_0 + bytes([0]) + f32(-1) + bytes([1]),
     "negative scale"),
    ("v3-block-huge", "truncated", N16, bytes([3, 1, 2, 2, 0, 0x03]) + MAX64 + f32(1) + bytes([1]),
     "block 2**64 − 1 ≥ k: one scale, then k = 2 codes (1 there); nothing sized by the block"),
    ("v3-int8-cut", "truncated", N16, bytes([3, 1, 2, 2, 0, 0x03, 0]) + f32(1) + bytes([1]), "k int8 codes"),
    ("v3-int8-minus-128", "bad-levels", N16, bytes([3, 1, 2]) + ONE_AT_0 + bytes([0]) + f32(1) + bytes([0x80]),
     "int8 code −128 (codes are −127…127)"),
    ("v3-int4-minus-8", "bad-levels", N16, bytes([3, 1, 3]) + ONE_AT_0 + bytes([0]) + f32(1) + bytes([0x08]),
     "int4 code −8 (codes are −7…7)"),
    ("v3-int4-padding", "bad-bits", N16, bytes([3, 1, 3]) + ONE_AT_0 + bytes([0]) + f32(1) + bytes([0x88]),
     "k = 1: the high nibble is padding, checked before the codes' range"),
    ("v3-sign-padding", "bad-bits", N16, bytes([3, 1, 4]) + ONE_AT_0 + bytes([0]) + f32(1) + bytes([0x02]),
     "sign bits: padding bit set"),
    ("v3-code-overflow", "non-finite", N16, bytes([3, 1, 2]) + ONE_AT_0 + bytes([0]) + f32(3e38) + bytes([127]),
     "a finite scale times a code overflows f32"),
    ("v3-trailing", "trailing-bytes", N16, bytes([3, 1, 0]) + ONE_AT_0 + f32(1) + bytes([0]), "bytes after the last entry"),
    ("v3-stc-gap-past-n", "bad-indices", {"x": [10]}, bytes([3, 8]) + f32(1) + bytes([2, 2, 0xF9, 0]),
     "stc's index block is the v3 one"),
    ("v3-dense-nan", "non-finite", N16, bytes([3, 0, 0]) + f32(np.nan, *([0] * 15)),
     "other kinds keep their version 1 bodies"),
]


def reject_cases() -> list[dict]:
    return [{"name": name, "reason": reason, "shapes": shapes, "hex": data.hex(), "rule": rule}
            for name, reason, shapes, data, rule in REJECT_CASES]
