"""Checkpoint state as plain data (``fedgc.core.plain_state``): what goes in comes back, shared
references and cycles included, through ``torch.load(weights_only=True)``; nothing else is rebuilt."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest
import simpy
import torch

from fedgc.core.plain_state import PlainStateError, from_plain, to_plain
from fedgc.network.availability import ExponentialOnOff
from fedgc.network.compute import Device
from fedgc.network.links.gilbert_elliott import GilbertElliottLink
from fedgc.network.timeline import ClientNetwork, NetworkModel


def through_file(value):
    buffer = io.BytesIO()
    torch.save(to_plain(value), buffer)
    buffer.seek(0)
    return from_plain(torch.load(buffer, weights_only=True))


def test_values_come_back_with_their_types():
    rng = np.random.default_rng(3)
    rng.random(5)
    state = {"counter": Counter({"cut": 2, "late": 1}), "set": {1, 5}, "array": np.arange(6.0).reshape(2, 3),
             "scalar": np.float32(1.5), "tuple": (1, "a", None), "rng": rng, "tensor": torch.ones(2),
             "keys": {3: [1.0, float("inf")], (1, 2): b"\x00\x01"}, "__fedgc__": "a key like the tag"}
    back = through_file(state)
    assert back["counter"] == state["counter"] and isinstance(back["counter"], Counter)
    assert back["set"] == {1, 5} and back["tuple"] == (1, "a", None) and back["keys"] == state["keys"]
    assert np.array_equal(back["array"], state["array"]) and back["array"].dtype == np.float64
    assert back["scalar"] == 1.5 and type(back["scalar"]) is float
    assert torch.equal(back["tensor"], state["tensor"]) and back["__fedgc__"] == "a key like the tag"
    assert np.array_equal(back["rng"].random(4), rng.random(4))  # the generator goes on where it was


def test_a_network_model_comes_back_with_its_shared_links_and_sample_paths():
    rngs = [np.random.default_rng(s) for s in range(3)]
    link = GilbertElliottLink(5.0, 20.0, 40.0, 5.0, rngs[0], mean_good_s=3.0, mean_bad_s=1.0)
    clients = {n: ClientNetwork(link if n < 3 else GilbertElliottLink(1.0, 2.0, rng=rngs[1]),
                                Device(samples_per_s=100.0),
                                ExponentialOnOff(10.0, 5.0, rngs[2])) for n in (1, 2, 3)}
    network = NetworkModel(None, clients)
    link.serialize_time(30.0, 100_000, "up")  # a sample path drawn part of the way
    back = through_file(network)
    assert back.clients[1].link is back.clients[2].link is not back.clients[3].link  # sharing kept
    assert back.clients[1].link._curves["up"]._segment.link is back.clients[1].link  # and the cycle
    for t in (0.0, 12.5, 300.0):  # the restored processes draw what the originals draw
        assert back.clients[1].link.serialize_time(t, 50_000, "down") == link.serialize_time(t, 50_000, "down")
        assert back.clients[3].availability.next_off(t) == clients[3].availability.next_off(t)
    assert back.clients[1].device == clients[1].device
    assert back.clients[1].availability.rng is back.clients[3].availability.rng  # one generator stays one


def test_only_allowed_classes_are_written_or_rebuilt():
    with pytest.raises(PlainStateError, match="Environment cannot be checkpointed"):
        to_plain({"env": simpy.Environment()})
    for name in ("os:system", "builtins:eval", "fedgc.network:os", "fedgc.networkx.evil:Thing",
                 "fedgc.network.timeline:simpy.Environment", "fedgc.network.timeline:np"):
        with pytest.raises(PlainStateError, match=r"allowed|does not exist"):
            from_plain({"__fedgc__": "object", "id": 0, "class": name, "dict": {}})
    with pytest.raises(PlainStateError, match="unknown random generator"):
        from_plain({"__fedgc__": "generator", "state": {"bit_generator": "os.system"}})
