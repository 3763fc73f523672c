"""The ClientApp's cheaper paths build exactly what Flower's own constructors and views give: the
client state's arrays and records (``new_array``, ``array_record``, ``pack_state``), a record looked
up without Flower's typed views (``record_of``), and a client config read once per distinct content
(``client_app._read_settings``) while a refused one is refused on every message."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fedgc.flower import keys
from fedgc.flower.client import client_app
from fedgc.flower.client_checks import ClientRefusal, NodeLimits, record_of
from fedgc.flower.client_config import client_config_record
from fedgc.flower.state.client_state import array_record, new_array, pack_state, unpack_state
from fedgc.flower.state.state_bytes import decode_state, encode_state
from fedgc.scenario.model import validate

SCENARIO = validate({"name": "records", "seed": 3, "rounds": 1, "data": {"dataset": "digits", "num_clients": 2},
                     "model": {"name": "mlp"}, "client": {"local_steps": 1, "batch_size": 8, "lr": 0.1},
                     "compression": {"name": "dgc", "density": 0.05, "momentum": 0.9}})


def flower_record(arrays: dict[str, np.ndarray]) -> ArrayRecord:
    """What Flower itself builds: ``Array(ndarray)`` (np.save) in an ``ArrayRecord``, item by item."""
    record = ArrayRecord()
    for key, value in arrays.items():
        record[key] = Array(value)
    return record


def test_new_array_and_array_record_are_flowers_own_objects() -> None:
    data = Array(np.arange(6, dtype=np.float32).reshape(2, 3))
    fast = new_array(data.dtype, tuple(data.shape), data.stype, data.data)
    assert fast.__dict__ == Array(dtype=data.dtype, shape=tuple(data.shape), stype=data.stype, data=data.data).__dict__
    assert fast.is_dirty and fast.object_id == data.object_id and not fast.is_dirty
    np.testing.assert_array_equal(fast.numpy(), data.numpy())
    record = array_record({"a": fast, "b": data})
    assert list(record) == ["a", "b"] and record.is_dirty
    assert record.object_id == flower_record({"a": data.numpy(), "b": data.numpy()}).object_id
    with pytest.raises(TypeError):
        array_record({"a": fast, "b": np.zeros(2)})  # type: ignore[dict-item]  # Flower's own check still refuses it


def test_packed_state_is_byte_for_byte_what_flower_builds() -> None:
    generator = torch.Generator().manual_seed(0)
    dense = torch.randn(40, 30, generator=generator)
    sparse = torch.zeros(50, 40)
    sparse.view(-1)[torch.tensor([3, 700, 1999])] = torch.tensor([1.5, -0.0, float("nan")])
    small = torch.randn(10, generator=generator)
    packed = pack_state({"dense": dense, "sparse": sparse, "small": small})
    indices = (sparse.view(-1).view(torch.int32) != 0).nonzero().view(-1).numpy().astype(np.int32)
    expected = flower_record({"dense": dense.numpy(), "sparse-indices/sparse": indices,
                              "sparse-values/sparse": sparse.view(-1).numpy()[indices],
                              "sparse-shape/sparse": np.asarray([50, 40], dtype=np.int64), "small": small.numpy()})
    assert list(packed) == list(expected)
    assert [a.__dict__ for a in packed.values()] == [a.__dict__ for a in expected.values()]
    assert packed.object_id == expected.object_id
    back = unpack_state(decode_state(encode_state(RecordDict({"s": packed}))).array_records["s"], 10_000)
    for name, tensor in {"dense": dense, "sparse": sparse, "small": small}.items():
        assert torch.equal(back[name].view(torch.int32), tensor.view(torch.int32))


def test_record_of_answers_as_flowers_typed_views() -> None:
    content = RecordDict({"a": ArrayRecord(), "c": ConfigRecord({"x": 1}), "m": MetricRecord({"y": 2})})
    for kind, view in ((ArrayRecord, content.array_records), (ConfigRecord, content.config_records),
                       (MetricRecord, content.metric_records)):
        for key in ("a", "c", "m", "missing"):
            assert record_of(content, key, kind) is view.get(key)


def test_a_client_config_is_read_once_per_exact_content_and_a_refusal_every_time() -> None:
    client_app._SETTINGS_READ.clear()
    limits = NodeLimits()
    first = client_config_record(SCENARIO, (64,), 10)
    same = client_config_record(SCENARIO, (64,), 10)
    settings, specs, shapes = client_app._read_settings(first, limits, None)
    assert client_app._read_settings(same, limits, None)[0] is settings  # the round's other messages
    assert list(shapes) == list(specs) and all(shapes[k] == specs[k][1] for k in specs)
    signed = client_config_record(SCENARIO, (64,), 10)
    signed[keys.CC_WEIGHT_DECAY] = -0.0  # equal to 0.0 in Python, not on the wire: read on its own
    assert math.copysign(1.0, client_app._read_settings(signed, limits, None)[0].weight_decay) == -1.0
    assert client_app._read_settings(first, NodeLimits(max_local_steps=5), None)[0] is not settings
    bad = client_config_record(SCENARIO, (64,), 10)
    bad[keys.CC_BATCH_SIZE] = 0
    for _ in range(2):
        with pytest.raises(ClientRefusal, match="bad-client-config"):
            client_app._read_settings(bad, limits, None)
    tight = NodeLimits(max_batch_size=4)  # the node's limits are part of what was read
    for _ in range(2):
        with pytest.raises(ClientRefusal, match="bad-client-config"):
            client_app._read_settings(first, tight, None)
    huge = client_config_record(SCENARIO, (64,), 10)
    huge["unread"] = list(range(client_app.MAX_CACHED_CONFIG_ITEMS + 1))  # read, never kept
    before = len(client_app._SETTINGS_READ)
    assert client_app._read_settings(huge, limits, None)[0] == settings
    assert len(client_app._SETTINGS_READ) == before


def test_a_round_trip_gives_each_message_config_records_of_its_own_equal_to_flowers() -> None:
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects, no_object_id_recompute
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
    from flwr.supercore.task_identity import TaskIdentity

    from fedgc.flower import message_size
    from fedgc.flower.message_size import roundtrip

    saved = TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 7, 1
    try:
        shared = client_config_record(SCENARIO, (64,), 10)  # one record in every message, as the strategy's
        model = ArrayRecord({"w": torch.arange(12, dtype=torch.float32).reshape(3, 4)})
        rebuilt = []
        for node in range(1, 5):
            content = RecordDict({"arrays": model, keys.CLIENT_CONFIG: shared,
                                  "config": ConfigRecord({"server-round": 2, "applied-rounds": [1], "x": -0.0})})
            message = Message(content, dst_node_id=node, message_type="train", group_id="2")
            back, _ = roundtrip(message)
            with no_object_id_recompute():
                flower = {i: o.deflate() for i, o in get_all_nested_objects(message).items()}
            fresh = inflate_object_from_contents(message.object_id, flower)
            assert isinstance(fresh, Message)
            for name in (keys.CLIENT_CONFIG, "config"):
                got, want = back.content[name], fresh.content[name]
                assert type(got) is ConfigRecord and got.__dict__.keys() == want.__dict__.keys()
                assert [(k, type(v), v) for k, v in got.items()] == [(k, type(v), v) for k, v in want.items()]
            assert math.copysign(1.0, back.content["config"]["x"]) == -1.0
            assert back.content["arrays"].__dict__.keys() == fresh.content["arrays"].__dict__.keys()
            assert [a.__dict__ for a in back.content["arrays"].values()] == [
                a.__dict__ for a in fresh.content["arrays"].values()]
            rebuilt.append(back)
            back.content["config"]["applied-rounds"].append(99)  # one client's change reaches no later message
            back.content[keys.CLIENT_CONFIG]["lr"] = 9.0
        assert len(message_size._config_records) >= 2  # both configs rebuilt once, then copied
        first, second = rebuilt[0].content, rebuilt[1].content
        assert first["config"] is not second["config"] and first["arrays"] is not second["arrays"]
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved
