"""The rejection vectors (tests/vectors/reject/*.json), made by hand from the spec's rules; written by
``python -m tests.make_vectors`` and checked by tests/test_vectors.py (and the JVM client's tests)."""

from __future__ import annotations

import io

import numpy as np

F1 = np.float32(1.0).tobytes()
V11 = bytes([0x80] * 10 + [0x01])  # 11 bytes
BIG = bytes([0xFF] * 9 + [0x02])  # 10 bytes, 2**64 + …
MAX64 = bytes([0xFF] * 9 + [0x01])  # 2**64 − 1


def f32(*values: float) -> bytes:
    return np.array(values, dtype="<f4").tobytes()


def f16(*values: float) -> bytes:
    return np.array(values, dtype="<f2").tobytes()


ONE = {"x": [4]}
BLOB_CASES = [  # (name, reason, shapes, bytes, the rule it shows)
    ("empty", "bad-version", ONE, b"", "an empty blob has no version byte"),
    ("version-2", "bad-version", ONE, bytes([2, 0]), "version byte must be 1"),
    ("no-kind", "truncated", ONE, bytes([1]), "the kind byte is a field"),
    ("kind-9", "bad-kind", ONE, bytes([1, 9]), "kind above 8"),
    ("no-dtype", "truncated", ONE, bytes([1, 0]), "the dtype byte is a field"),
    ("dtype-2", "bad-dtype", ONE, bytes([1, 0, 2]) + f32(1, 2, 3, 4), "dtype byte above 1"),
    ("dense-cut", "truncated", ONE, bytes([1, 0, 0]) + f32(1, 2, 3), "4 values need 16 bytes"),
    ("dense-nan", "non-finite", ONE, bytes([1, 0, 0]) + f32(1, np.nan, 0, 0), "NaN value"),
    ("dense-f16-inf", "non-finite", ONE, bytes([1, 0, 1]) + f16(1, np.inf, 0, 0), "Inf f16 value"),
    ("dense-nan-then-cut", "non-finite", {"x": [4], "y": [1]}, bytes([1, 0, 0]) + f32(np.nan, 0, 0, 0),
     "checks run in reading order: a bad value before the end of the blob"),
    ("trailing", "trailing-bytes", ONE, bytes([1, 0, 0]) + f32(1, 2, 3, 4) + b"\0", "bytes after the last entry"),
    ("two-params-cut", "truncated", {"x": [4], "y": [2]}, bytes([1, 0, 0]) + f32(1, 2, 3, 4),
     "an entry per parameter"),
    ("index-no-mode", "truncated", ONE, bytes([1, 1, 0]), "cut index block: the mode byte"),
    ("index-mode-2", "bad-indices", ONE, bytes([1, 1, 0, 2, 0]), "unknown index mode"),
    ("index-k-cut", "truncated", ONE, bytes([1, 1, 0, 0, 0x83]), "cut index block: k"),
    ("index-k-11", "bad-varint", ONE, bytes([1, 1, 0, 0]) + V11, "k longer than 10 bytes"),
    ("index-k-huge", "bad-varint", ONE, bytes([1, 1, 0, 0]) + BIG, "k ≥ 2**64"),
    ("index-k-max", "bad-indices", ONE, bytes([1, 1, 0, 0]) + MAX64, "k = 2**64−1 > n"),
    ("index-k-5", "bad-indices", ONE, bytes([1, 1, 0, 0, 5]), "k > n"),
    ("index-gap-cut", "truncated", ONE, bytes([1, 1, 0, 0, 2, 0]), "cut index block: a gap"),
    ("index-gap-cut-mid", "truncated", ONE, bytes([1, 1, 0, 0, 1, 0x80]), "cut index block: inside a gap"),
    ("index-gap-11", "bad-varint", ONE, bytes([1, 1, 0, 0, 1]) + V11, "gap longer than 10 bytes"),
    ("index-gap-long-at-end", "bad-varint", ONE, bytes([1, 1, 0, 0, 1]) + bytes([0x80] * 10),
     "10 bytes without an end: too long, although the blob ends there"),
    ("index-gap-oob", "bad-indices", ONE, bytes([1, 1, 0, 0, 1, 4]) + F1, "index ≥ n"),
    ("index-gap-sum", "bad-indices", ONE, bytes([1, 1, 0, 0, 2, 3, 3]) + f32(1, 2), "second index 3+3+1 ≥ n"),
    ("index-oob-then-cut", "bad-indices", ONE, bytes([1, 1, 0, 0, 2, 7]),
     "gaps are checked one by one: gap 0 out of bounds before gap 1 is missing"),
    ("index-huge-then-cut", "bad-varint", ONE, bytes([1, 1, 0, 0, 2]) + BIG,
     "gap 0 ≥ 2**64 before gap 1 is missing"),
    ("bitmap-cut", "truncated", {"x": [20]}, bytes([1, 1, 0, 1, 0]), "cut index block: the bitmap"),
    ("bitmap-padding", "bad-indices", ONE, bytes([1, 1, 0, 1, 0x10]) + F1, "bitmap padding bit set"),
    ("sparse-values-cut", "truncated", ONE, bytes([1, 1, 0, 1, 0x03]) + F1, "k = 2 values"),
    ("sign-cut-scale", "truncated", ONE, bytes([1, 2]) + F1, "pos and neg"),
    ("sign-negative", "negative-scale", ONE, bytes([1, 2]) + f32(1, -1) + bytes(1), "neg < 0"),
    ("sign-negative-and-nan", "non-finite", ONE, bytes([1, 2]) + f32(-1, np.nan) + bytes(1),
     "within one scale field non-finite is checked before negative-scale"),
    ("sign-padding", "bad-bits", ONE, bytes([1, 2]) + f32(1, 1) + bytes([0x10]), "sign padding bit set"),
    ("vote-cut-bits", "truncated", ONE, bytes([1, 3]) + F1, "the sign bits"),
    ("ternary-243", "bad-bits", ONE, bytes([1, 4]) + F1 + bytes([243]), "trit byte above 242"),
    ("ternary-padding", "bad-bits", ONE, bytes([1, 4]) + F1 + bytes([81]), "trit 4 of 4 elements set"),
    ("ternary-inf", "non-finite", ONE, bytes([1, 4]) + f32(np.inf) + bytes(1), "Inf scale"),
    ("qsgd-s-0", "bad-levels", ONE, bytes([1, 5, 0, 4]) + F1 + bytes(2), "s = 0"),
    ("qsgd-s-32768", "bad-levels", ONE, bytes([1, 5, 0x80, 0x80, 0x02, 4]) + F1 + bytes(4), "s > 32767"),
    ("qsgd-s-0-d-cut", "bad-levels", ONE, bytes([1, 5, 0]), "s is checked before d is read"),
    ("qsgd-s-11", "bad-varint", ONE, bytes([1, 5]) + V11 + bytes([4]) + F1 + bytes(2), "s longer than 10 bytes"),
    ("qsgd-s-cut", "truncated", ONE, bytes([1, 5, 0x83]), "s cut"),
    ("qsgd-d-0", "bad-levels", ONE, bytes([1, 5, 3, 0]) + F1 + bytes(2), "d = 0"),
    ("qsgd-d-huge", "bad-varint", ONE, bytes([1, 5, 3]) + BIG + F1 + bytes(2), "d ≥ 2**64"),
    ("qsgd-norms-cut", "truncated", ONE, bytes([1, 5, 3, 2]) + F1, "ceil(4/2) = 2 norms"),
    ("qsgd-norm-negative", "negative-scale", ONE, bytes([1, 5, 3, 4]) + f32(-1) + bytes(2), "norm < 0"),
    ("qsgd-codes-cut", "truncated", ONE, bytes([1, 5, 3, 4]) + F1 + bytes(1), "4 codes of 3 bits: 2 bytes"),
    ("qsgd-padding", "bad-bits", ONE, bytes([1, 5, 3, 4]) + F1 + bytes([0, 0x10]), "code padding bit set"),
    ("qsgd-code-7", "bad-levels", ONE, bytes([1, 5, 3, 4]) + F1 + bytes([7, 0]), "code 7 > 2s = 6"),
    ("qsgd-code-and-padding", "bad-bits", ONE, bytes([1, 5, 3, 4]) + F1 + bytes([7, 0x10]),
     "within the codes field padding is checked before the code bound"),
    ("qsgd-overflow", "non-finite", ONE, bytes([1, 5, 3, 4]) + f32(3e38) + bytes([0, 0]),
     "norm·l rounds to −Inf in f32 before the division by s"),
    ("qsgd-n0-cut", "truncated", {"x": [0]}, bytes([1, 5, 1]), "n = 0 still has s and d"),
    ("natural-255", "non-finite", ONE, bytes([1, 6, 255, 0, 0, 0, 0]), "exponent 255"),
    ("natural-255-cut-signs", "non-finite", ONE, bytes([1, 6, 255, 0, 0, 0]),
     "the exponents are checked before the sign bits are read"),
    ("lowrank-rank-0", "bad-rank", {"x": [2, 2]}, bytes([1, 7, 0, 0]), "r = 0"),
    ("lowrank-rank-3", "bad-rank", {"x": [2, 2]}, bytes([1, 7, 0, 3]), "r > min(rows, cols)"),
    ("lowrank-dtype-then-rank", "bad-dtype", {"x": [2, 2]}, bytes([1, 7, 5, 0]), "dtype before rank"),
    ("lowrank-cut-q", "truncated", {"x": [2, 2]}, bytes([1, 7, 0, 1]) + f32(1, 1, 1), "Q cut"),
    ("lowrank-overflow", "non-finite", {"x": [2, 2]}, bytes([1, 7, 0, 1]) + f32(3e38, 1, 3e38, 1),
     "P·Qᵀ overflows f32"),
    ("lowrank-sum-overflow", "non-finite", {"x": [2, 2]}, bytes([1, 7, 0, 2]) + f32(3e38, 3e38, 1, 1, 1, 1, 1, 1),
     "a partial sum of P·Qᵀ overflows"),
    ("stc-negative", "negative-scale", ONE, bytes([1, 8]) + f32(-1) + bytes([1, 1]), "scale < 0"),
    ("stc-signs-cut", "truncated", ONE, bytes([1, 8]) + F1 + bytes([1, 0x0F]), "4 indices: 1 sign byte"),
    ("stc-signs-padding", "bad-bits", ONE, bytes([1, 8]) + F1 + bytes([1, 0x03, 0x04]), "2 sign bits: bit 2 set"),
]


def blob_cases() -> list[dict]:
    return [{"name": name, "reason": reason, "shapes": shapes, "hex": data.hex(), "rule": rule}
            for name, reason, shapes, data, rule in BLOB_CASES]


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


# A valid blob for SHAPES {"w": [4, 5], "b": [5]}: w sparse (indices 0, 3 of 20, f32), b dense f32.
GOOD = bytes([1, 1, 0, 0, 2, 0, 2]) + f32(1, 2) + bytes([0, 0]) + f32(1, 2, 3, 4, 5)


def _array(data: bytes, dtype: str = "uint8", shape: list[int] | None = None, stype: str = "numpy.ndarray") -> dict:
    """An Array as Flower's fields: dtype, shape (default: the blob's length), stype, data (hex)."""
    return {"dtype": dtype, "shape": [len(GOOD)] if shape is None else shape, "stype": stype, "data": data.hex()}


GOOD_RECORD = {"update": _array(npy(np.frombuffer(GOOD, np.uint8)))}
COMPACT_RECORD = {"blob": {"bytes": GOOD.hex()}}  # a ConfigRecord's values, each by its type
METRICS = {"num-examples": 10, "train-loss": 0.5, "steps": 2, "samples": 20, "elements-sent": 7,
           "elements-total": 25}
REPLY_CASES = [  # (name, reason, changes to the good reply, the rule)
    ("good", "ok", {}, "a valid reply is accepted"),
    ("unselected", "unexpected-sender", {"sender": "unselected"}, "node not selected this round"),
    ("stale", "stale-reply", {"reply_to": "another-message"}, "reply_to_message_id is not this round's"),
    ("duplicate", "duplicate-reply", {"duplicate": True}, "the same node's second reply"),
    ("no-metrics", "missing-metrics", {"metrics": None}, "no metrics record"),
    ("no-num-examples", "bad-num-examples", {"metrics": {"train-loss": 0.5}}, "num-examples missing"),
    ("num-examples-0", "bad-num-examples", {"metrics": {"num-examples": 0}}, "num-examples < 1"),
    ("num-examples-frac", "bad-num-examples", {"metrics": {"num-examples": 2.5}}, "not an integer"),
    ("loss-negative", "bad-metrics", {"metrics": {"num-examples": 10, "train-loss": -1.0}}, "train-loss < 0"),
    ("samples-high", "bad-metrics", {"metrics": {"num-examples": 10, "steps": 2, "samples": 21}},
     "samples > steps·num-examples"),
    ("metrics-before-update", "bad-metrics", {"metrics": {"num-examples": 10, "steps": 0}, "update": None},
     "metrics are checked before the update record"),
    ("no-update", "missing-update", {"update": None}, "no update record"),
    ("too-large", "too-large", {"max_update_bytes": 100}, "Σ len(array data) + len(key) > the limit"),
    ("two-arrays", "bad-record", {"update": {**GOOD_RECORD, "extra": _array(npy(np.zeros(1, np.uint8)), shape=[1])}},
     "one array, key update"),
    ("float-array", "bad-dtype", {"update": {"update": _array(npy(np.zeros(2, "<f4")), "float32", [2])}},
     "the array's dtype field must be uint8"),
    ("2d-array", "bad-dtype", {"update": {"update": _array(npy(np.zeros((2, 2), np.uint8)), "uint8", [2, 2])}},
     "the array's shape field must be 1-D"),
    ("raw-bytes", "bad-array", {"update": {"update": _array(GOOD)}}, "data must be .npy, not raw bytes"),
    ("other-stype", "bad-array", {"update": {"update": _array(npy(np.frombuffer(GOOD, np.uint8)), stype="raw")}},
     "stype must be numpy.ndarray"),
    ("npy-trailing", "bad-array", {"update": {"update": _array(npy(np.frombuffer(GOOD, np.uint8)) + b"\0",
                                                                 shape=[len(GOOD)])}}, "nothing after the .npy array"),
    ("npy-shape", "bad-array",
     {"update": {"update": _array(npy(np.frombuffer(GOOD, np.uint8)), shape=[len(GOOD) + 1])}},
     "the .npy shape must be the Array's shape field"),
    ("npy-int8", "bad-array", {"update": {"update": _array(npy(np.frombuffer(GOOD, np.int8)), shape=[len(GOOD)])}},
     "the .npy descr must be uint8"),
    ("blob-error", "trailing-bytes",
     {"update": {"update": _array(npy(np.frombuffer(GOOD + b"\0", np.uint8)), shape=[len(GOOD) + 1])}},
     "the blob's own reasons"),
    ("elements-sent", "bad-metrics", {"metrics": {**METRICS, "elements-sent": 8}},
     "elements-sent must be what the decoded update holds (checked after decoding)"),
    # The compact form (docs/wire-format.md, Framing): a ConfigRecord `update` with one bytes value `blob`.
    ("compact", "ok", {"update_kind": "config", "update": COMPACT_RECORD},
     "the compact form is read whatever the blob's version"),
    ("compact-two-values", "bad-record",
     {"update_kind": "config", "update": {**COMPACT_RECORD, "extra": {"bytes": "00"}}}, "one value, key blob"),
    ("compact-other-key", "bad-record", {"update_kind": "config", "update": {"update": {"bytes": GOOD.hex()}}},
     "the value's key is blob"),
    ("compact-text", "bad-record", {"update_kind": "config", "update": {"blob": {"str": GOOD.hex()}}},
     "the value is bytes, not a string"),
    ("compact-list", "bad-record", {"update_kind": "config", "update": {"blob": {"bytes_list": [GOOD.hex()]}}},
     "the value is one bytes, not a list of them"),
    ("compact-too-large", "too-large", {"update_kind": "config", "update": COMPACT_RECORD, "max_update_bytes": 10},
     "the compact record's bytes count against the limit before decoding"),
    ("compact-blob-error", "trailing-bytes",
     {"update_kind": "config", "update": {"blob": {"bytes": (GOOD + b"\0").hex()}}}, "the blob's own reasons"),
    ("update-as-metrics", "missing-update", {"update_kind": "metric", "update": {"blob": {"int": 1}}},
     "an update record of another kind is no update"),
]


def reply_cases() -> list[dict]:
    return [{"name": name, "reason": reason, "shapes": {"w": [4, 5], "b": [5]}, "metrics": METRICS,
             "update_kind": "array", "update": GOOD_RECORD, "sender": "selected", "reply_to": "sent", "duplicate": False,
             "max_update_bytes": None, **changes, "rule": rule}
            for name, reason, changes, rule in REPLY_CASES]
