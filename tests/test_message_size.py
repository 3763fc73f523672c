"""A message's byte count and its round trip are Flower's own, whatever fedgc reuses between messages.

The inline engine sends one global model (one ``ArrayRecord``) in every training message of a round
and serializes its subtree once (``fedgc.flower.message_size``). Each case below compares fedgc's
result with a fresh serialization by Flower alone: the same object ids, the same bytes, the same
count, and a rebuilt message with the same content.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects, no_object_id_recompute
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
from flwr.supercore.task_identity import TaskIdentity

from fedgc.flower import message_size
from fedgc.flower.message_size import deflate_message, message_wire_size, roundtrip


@pytest.fixture(autouse=True)
def task_identity():
    """Flower's task identity as the inline engine sets it (messages need a run id)."""
    saved = TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 7, 1
    message_size._subtrees.clear()
    message_size._configs.clear()
    yield
    message_size._subtrees.clear()
    message_size._configs.clear()
    TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def flower_alone(message: Message) -> tuple[str, dict[str, bytes]]:
    """The message's object tree as Flower serializes it when it pushes a message."""
    with no_object_id_recompute():
        objects = get_all_nested_objects(message)
        return message.object_id, {object_id: obj.deflate() for object_id, obj in objects.items()}


def serialized_as_flower_does(message: Message) -> None:
    """fedgc's serialization of ``message`` (ids, bytes, count) and its round trip are Flower's own."""
    got = deflate_message(message)
    expected_id, expected = flower_alone(message)
    assert got == (expected_id, expected)
    message.metadata.__dict__["_message_id"] = "m9"
    back, size = roundtrip(message)
    assert size == sum(len(b) for b in expected.values())
    same_content(back, inflate_object_from_contents(expected_id, dict(expected)))


def model_record(seed: int, shapes=((200, 784), (200,), (10, 200), (10,))) -> ArrayRecord:
    g = torch.Generator().manual_seed(seed)
    return ArrayRecord({f"t{i}": torch.randn(*s, generator=g) for i, s in enumerate(shapes)})


def train_message(arrays: ArrayRecord, node: int, server_round: int) -> Message:
    content = RecordDict({"arrays": arrays, "config": ConfigRecord({"server-round": server_round, "node": node})})
    return Message(content, dst_node_id=node, message_type="train", group_id=str(server_round))


def same_content(a: Message, b: Message) -> None:
    assert a.metadata.message_type == b.metadata.message_type and a.metadata.dst_node_id == b.metadata.dst_node_id
    assert list(a.content.keys()) == list(b.content.keys())
    for name in a.content.array_records:
        left, right = a.content.array_records[name], b.content.array_records[name]
        assert list(left) == list(right)
        for key in left:
            assert np.array_equal(left[key].numpy(), right[key].numpy()) and left[key].dtype == right[key].dtype
    for name in a.content.config_records:
        assert dict(a.content.config_records[name]) == dict(b.content.config_records[name])
    for name in a.content.metric_records:
        assert dict(a.content.metric_records[name]) == dict(b.content.metric_records[name])


def test_a_round_of_messages_sharing_one_model_serializes_as_flower_does_message_by_message():
    arrays = model_record(0)
    for node in range(1, 6):
        message = train_message(arrays, node, 1)
        object_id, contents = deflate_message(message)
        expected_id, expected = flower_alone(message)
        assert object_id == expected_id and contents == expected
        assert message_wire_size(message) == sum(len(b) for b in expected.values())
    assert len(message_size._subtrees) == 1  # the model was serialized once


def test_a_round_trip_rebuilds_each_message_from_the_bytes_with_a_record_of_its_own():
    arrays = model_record(1)
    rebuilt = []
    for node in range(1, 4):
        message = train_message(arrays, node, 2)
        message.metadata.__dict__["_message_id"] = f"m{node}"
        back, size = roundtrip(message)
        object_id, contents = flower_alone(message)
        fresh = inflate_object_from_contents(object_id, dict(contents))
        assert size == sum(len(b) for b in contents.values())
        same_content(back, fresh)
        assert back.metadata.message_id == f"m{node}"
        rebuilt.append(back)
    records = [m.content.array_records["arrays"] for m in rebuilt]
    assert len({id(r) for r in records}) == 3 and all(r is not arrays for r in records)
    records[0]["t1"] = Array(np.zeros(200, dtype=np.float32))  # one client's change reaches no other message
    assert not np.array_equal(records[1]["t1"].numpy(), np.zeros(200, dtype=np.float32))


@pytest.mark.parametrize("change", ["replace an array", "add an array", "delete an array", "a new record"])
def test_a_changed_model_is_serialized_anew(change):
    arrays = model_record(2)
    deflate_message(train_message(arrays, 1, 1))
    if change == "replace an array":
        arrays["t3"] = Array(np.arange(10, dtype=np.float32))
    elif change == "add an array":
        arrays["extra"] = Array(np.ones(3, dtype=np.float32))
    elif change == "delete an array":
        del arrays["t0"]
    else:
        arrays = model_record(3)
    serialized_as_flower_does(train_message(arrays, 2, 2))


def test_replies_and_messages_without_arrays_count_as_flower_counts_them():
    sparse = ArrayRecord({"update": Array(np.frombuffer(bytes(range(256)) * 3, dtype=np.uint8).copy())})
    twin = ArrayRecord({"a": Array(np.ones(4, dtype=np.float32)), "b": Array(np.ones(4, dtype=np.float32))})
    compact = ConfigRecord({"blob": bytes(range(256)) * 3})  # a v3 blob in the compact form
    for content in (RecordDict({"update": sparse, "metrics": MetricRecord({"num-examples": 12, "loss": 0.5})}),
                    RecordDict({"update": compact, "metrics": MetricRecord({"num-examples": 12, "loss": 0.5})}),
                    RecordDict({"twins": twin}),  # two equal arrays: one object on the wire
                    RecordDict({"config": ConfigRecord({"query": "partition"})}),
                    RecordDict()):
        for _ in range(2):  # the second time through the reuse path
            serialized_as_flower_does(Message(content, dst_node_id=3, message_type="query", group_id="1"))


def test_what_is_kept_between_messages_is_bounded():
    for seed in range(message_size.MAX_CACHED_RECORDS + 3):
        deflate_message(train_message(model_record(seed, shapes=((20, 20),)), 1, seed))
    assert len(message_size._subtrees) == message_size.MAX_CACHED_RECORDS


def test_a_config_record_every_message_shares_is_deflated_once_and_every_change_is_serialized_anew(monkeypatch):
    """The client-config the strategy puts in every training message of a round (one ``ConfigRecord``)
    is deflated for the first message only (its id and its bytes), not twice a message; any change to
    it is serialized anew as Flower does: a value Python calls equal but Flower writes otherwise (1,
    1.0, True; 0.0 and -0.0; NaNs of two payloads), a list of another type, a key added or removed."""
    shared = ConfigRecord({"model": "mnist_2nn", "input-shape": [1, 28, 28], "lr": 0.05, "momentum": 0.0,
                           "steps": 1, "nesterov": False, "blob": b"\x00\x01"})
    deflated = []
    flower_deflate = ConfigRecord.deflate

    def counted(record):
        deflated.append(record is shared)
        return flower_deflate(record)

    monkeypatch.setattr(ConfigRecord, "deflate", counted)
    arrays = model_record(4, shapes=((20, 20),))

    def message(node: int) -> Message:
        built = train_message(arrays, node, 1)
        built.content["client-config"] = shared
        built.metadata.__dict__["_message_id"] = f"m{node}"
        return built

    for node in range(1, 6):
        roundtrip(message(node))
    assert sum(deflated) == 2
    nan_payload = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    changes = [("steps", True), ("steps", 1.0), ("steps", 1), ("momentum", -0.0), ("momentum", 0.0),
               ("input-shape", [1.0, 28.0, 28.0]), ("blob", b"\x00\x02"), ("extra", "x"), ("extra", None),
               ("lr", float("nan")), ("lr", nan_payload)]
    for key, value in changes:
        if value is None:
            del shared[key]
        else:
            shared[key] = value
        sent = message(7)
        if key == "lr":  # NaN is unequal to itself: the ids and bytes say it all
            assert deflate_message(sent) == flower_alone(sent)
        else:
            serialized_as_flower_does(sent)
    for node in range(message_size.MAX_CACHED_CONFIGS + 3):  # a config of its own per message: bounded
        deflate_message(train_message(arrays, node, 3))
    assert len(message_size._configs) == message_size.MAX_CACHED_CONFIGS


def test_a_config_record_whose_kept_id_is_stale_never_lends_it_to_later_messages():
    """A record changed after Flower computed its id, sent beside a record still holding its old
    content (Flower's own serialization then lists it by the old id), leaves nothing behind: the next
    message holding it is serialized as Flower serializes it."""
    arrays = model_record(5, shapes=((20, 20),))
    changed = ConfigRecord({"lr": 0.1, "steps": 2})
    message = train_message(arrays, 1, 1)
    message.content["client-config"] = changed
    deflate_message(message)  # its id computed for {lr 0.1, steps 2}
    changed["steps"] = 3
    beside = train_message(arrays, 2, 1)
    beside.content["old"] = ConfigRecord({"lr": 0.1, "steps": 2})
    beside.content["client-config"] = changed
    deflate_message(beside)
    later = train_message(arrays, 3, 1)
    later.content["client-config"] = changed
    serialized_as_flower_does(later)
