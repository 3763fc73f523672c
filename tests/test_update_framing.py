"""How an update blob travels in a Flower message (docs/wire-format.md, "Framing"): a version-1 blob
in an ``ArrayRecord`` holding one uint8 ``Array`` (a .npy file), as every client has always read it; a
v3 blob of at most 1 MiB in the compact form, a ``ConfigRecord`` holding it as one bytes value, which
spares the ``Array``'s and its record's object headers, ids and .npy header; a larger v3 blob in an
``ArrayRecord`` again, which Flower splits into chunks. A receiver reads both forms. Only a node that
declared v3 at the census is sent a v3 blob (tests/test_wire_census.py), so never the compact form."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

import fedgc
from fedgc.compress.payloads import DensePayload, SparsePayload
from fedgc.compress.update import _with_value_dtype as in_value_dtype
from fedgc.flower.message_size import message_wire_size
from fedgc.flower.update_record import (
    BLOB_KEY,
    MAX_COMPACT_BYTES,
    NPY_STYPE,
    CodecError,
    decode_update,
    encode_update,
    npy_header,
)
from fedgc.wire.codec import decode_bytes, encode_bytes

SHAPES = {"w": (40, 50), "b": (50,)}


@pytest.fixture(autouse=True)
def task_identity():
    saved = TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 7, 1
    yield
    TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def sparse_update(encoding: str | None, n: int = 2000, kept: int = 20) -> dict:
    """``w`` top-``kept`` of ``n`` entries (values in ``encoding``: a v3 blob; None: fp32, version 1) and
    ``b`` dense."""
    g = torch.Generator().manual_seed(0)
    indices = torch.randperm(n, generator=g)[:kept].sort().values
    values = torch.randn(kept, generator=g)
    w = SparsePayload(indices=indices, values=values, shape=(40, 50) if n == 2000 else (n,))
    if encoding is not None:
        w = in_value_dtype(w, encoding)
    return {"w": w, "b": DensePayload(torch.randn(50, generator=g), (50,))}


def reply_size(record) -> int:
    metrics = MetricRecord({"num-examples": 600, "train-loss": 2.3})
    return message_wire_size(Message(RecordDict({"update": record, "metrics": metrics}), dst_node_id=3,
                                     message_type="train"))


def as_array_record(blob: bytes) -> ArrayRecord:
    return ArrayRecord({"update": Array(dtype="uint8", shape=(len(blob),), stype=NPY_STYPE,
                                        data=npy_header(len(blob)) + blob)})


@pytest.mark.parametrize("encoding", ["int8", "int4", "sign"])
def test_a_small_v3_blob_travels_as_bytes_in_a_config_record_and_decodes_as_the_blob(encoding):
    payloads = sparse_update(encoding)
    record = encode_update(payloads)
    blob = encode_bytes(payloads, version=3)
    assert isinstance(record, ConfigRecord) and list(record) == [BLOB_KEY] and record[BLOB_KEY] == blob
    for form in (record, as_array_record(blob)):  # a receiver reads either form
        decoded = decode_update(form, SHAPES)
        assert encode_bytes(decoded, version=3) == blob
        assert encode_bytes(decoded, version=3) == encode_bytes(decode_bytes(blob, SHAPES), version=3)


def test_a_version_1_blob_stays_in_its_array_record():
    record = encode_update(sparse_update(None))
    assert isinstance(record, ArrayRecord) and list(record) == ["update"]
    assert record["update"].stype == NPY_STYPE


def test_a_v3_blob_above_the_compact_bound_travels_in_an_array_record_flower_chunks():
    n = 4 * MAX_COMPACT_BYTES  # int8 codes of a quarter of them kept: a blob of more than 1 MiB
    payloads = {"x": in_value_dtype(SparsePayload(indices=torch.arange(0, n, 3), values=torch.ones(len(range(0, n, 3))),
                                                  shape=(n,)), "int8")}
    record = encode_update(payloads)
    assert isinstance(record, ArrayRecord) and record["update"].shape[0] > MAX_COMPACT_BYTES
    assert decode_update(record, {"x": (n,)})["x"].shape == (n,)


def test_the_compact_form_spares_the_array_framing_of_a_reply():
    """The same v3 blob, in both forms, in a reply with the same metrics: the compact form spares the
    ``Array`` and ``ArrayRecord`` objects (their headers, two 64-character ids), the .npy header and the
    array-chunk object, about 440 bytes; what is left around the blob is the message, its record dict
    and the metrics."""
    payloads = sparse_update("int4")
    blob = encode_bytes(payloads, version=3)
    compact, arrays = reply_size(encode_update(payloads)), reply_size(as_array_record(blob))
    assert arrays - compact >= 400
    assert compact - len(blob) < 600 < arrays - len(blob)


@pytest.mark.parametrize(("record", "reason"), [
    (ConfigRecord({BLOB_KEY: b"\x03", "more": b""}), "bad-record"),
    (ConfigRecord({"update": b"\x03"}), "bad-record"),
    (ConfigRecord({BLOB_KEY: "03"}), "bad-record"),
    (ConfigRecord({BLOB_KEY: 3}), "bad-record"),
    (ConfigRecord({BLOB_KEY: [b"\x03"]}), "bad-record"),
    (ConfigRecord({BLOB_KEY: b"\x03" + bytes(MAX_COMPACT_BYTES)}), "bad-record"),
    (ConfigRecord({BLOB_KEY: b""}), "bad-version"),
    (ConfigRecord({BLOB_KEY: b"\x02"}), "bad-version"),
])
def test_a_malformed_compact_record_is_refused_with_a_reason(record, reason):
    with pytest.raises(CodecError) as err:
        decode_update(record, SHAPES)
    assert err.value.reason == reason


def test_a_run_with_v3_both_ways_sends_compact_replies_and_downloads_and_applies_every_update(tiny_scenario):
    """A simulation whose uploads and compressed downloads carry int4 values: every reply is applied,
    every client rebuilds its replica from a compact download (a failed one would be counted and reset),
    and a reply's bytes are its blob plus the compact framing."""
    scenario = {**tiny_scenario, "rounds": 3, "compression": {"name": "topk", "density": 0.05, "value_dtype": "int4"},
                "downlink": {"name": "topk", "density": 0.1, "value_dtype": "int4"}}
    run = fedgc.run(fedgc.Scenario.from_dict(scenario))
    assert run.summary.updates_rejected == 0 and run.summary.clients_failed == 0
    assert all(r.applied == r.selected for r in run.rounds)
    assert all(r.downlink_resets == 0 for r in run.rounds[1:])
    dense = np.mean([r.dense_bytes_up / r.selected for r in run.rounds])
    reply = np.mean([r.bytes_up / r.selected for r in run.rounds])
    assert reply < dense / 10
