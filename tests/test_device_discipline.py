"""Every tensor the compression core makes lives where its inputs live.

On a GPU a client's update, memory and draws are CUDA tensors, and a single allocation that falls
back to PyTorch's default device would put a CPU tensor next to them (an error, or a silent copy
across the bus every round). There is no GPU here, so the tests move the default device instead:
with it set to ``meta`` (a device that holds no data), every step on CPU inputs must still give CPU
tensors, equal bit for bit to the same step run normally. An allocation that trusted the default
device would land on ``meta`` and fail or show up in the outputs.

Covered: the 15 compressors through ``compress_update`` with error feedback over two rounds, an
unapplied update restored into the memory, the wire codec's round trip, the server's aggregation
(weighted mean, median, trimmed mean), the server optimizers (also resumed from a checkpoint),
compressed downloads and the client state kept in ``context.state``.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS
from fedgc.compress import compressor_names
from fedgc.compress.aggregate import aggregate_payloads, coordinate_wise
from fedgc.compress.base import CompressionContext
from fedgc.compress.config import CompressionConfig
from fedgc.compress.downlink import DOWNLINK_COMPRESSORS, DownlinkConfig, make_download
from fedgc.compress.payloads import decompress, payload_to
from fedgc.compress.randomness import generator_on
from fedgc.compress.update import build_compression, compress_update
from fedgc.data.base import ArrayDataset
from fedgc.flower.state.client_state import pack_state, unpack_state
from fedgc.wire.codec import decode_bytes, encode_bytes

CPU = torch.device("cpu")
SHAPES = {"conv": (8, 3, 3, 3), "fc": (40, 30), "bias": (10,)}


def update(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=g) for name, shape in SHAPES.items()}


def on_meta(step):
    """``step()`` with PyTorch's default device set to ``meta``, restored afterwards."""
    torch.set_default_device("meta")
    try:
        return step()
    finally:
        torch.set_default_device(None)


def tensors_of(value) -> list[torch.Tensor]:
    """Every tensor inside ``value`` (nested dicts, lists, tuples and dataclasses)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_of(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    if hasattr(value, "__dataclass_fields__"):
        return [t for v in vars(value).values() for t in tensors_of(v)]
    return []


def assert_same(plain, meta) -> None:
    """``meta`` (made under the meta default device) is ``plain`` exactly, on the CPU."""
    expected, got = tensors_of(plain), tensors_of(meta)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        assert g.device == CPU, f"a tensor was made on {g.device}"
        assert g.dtype == e.dtype and g.shape == e.shape and torch.equal(g, e)


def client_rounds(name: str, rounds: list[dict[str, torch.Tensor]]) -> dict:
    """Two rounds of one client with error feedback; round 2's upload is lost and restored."""
    config = CompressionConfig(name=name, density=0.05)
    compressor, memory = build_compression(config)
    generator = torch.Generator().manual_seed(7)
    outputs = {}
    for round_, delta in enumerate(rounds, start=1):
        ctx = CompressionContext(round=round_, density=config.density, generator=generator, memory=memory,
                                 num_clients=4)
        compressed = compress_update(delta, compressor, memory, ctx, value_dtype=config.value_dtype)
        outputs[f"payloads{round_}"] = compressed.payloads
        outputs[f"sent{round_}"] = compressed.sent
    for tensor_name, sent in compressed.sent.items():
        memory.restore(tensor_name, sent)
    outputs["memory"] = memory.state_dict()
    outputs["decoded"] = decode_bytes(encode_bytes(compressed.payloads), SHAPES)
    outputs["dense"] = {n: decompress(p) for n, p in outputs["decoded"].items()}
    return outputs


@pytest.mark.parametrize("name", compressor_names())
def test_a_client_compresses_where_its_update_lives(name):
    rounds = [update(1), update(2)]
    assert_same(client_rounds(name, rounds), on_meta(lambda: client_rounds(name, rounds)))


def uploads(name: str) -> list[dict]:
    config = CompressionConfig(name=name, density=0.05)
    out = []
    for client in range(3):
        compressor, memory = build_compression(config)
        ctx = CompressionContext(density=config.density, generator=torch.Generator().manual_seed(client), memory=memory)
        out.append(compress_update(update(10 + client), compressor, memory, ctx).payloads)
    return out


@pytest.mark.parametrize("name", compressor_names())
def test_the_server_aggregates_on_the_device_it_is_given(name):
    payloads = uploads(name)

    def aggregate():
        return {
            "mean": aggregate_payloads([(0.5, payloads[0]), (0.3, payloads[1]), (0.2, payloads[2])], SHAPES,
                                       scales=[1.0, 0.5, 1.0], device=CPU),
            "median": coordinate_wise(payloads, SHAPES, [1.0, 1.0, 1.0], "median", device=CPU),
            "trimmed": coordinate_wise(payloads, SHAPES, [1.0, 1.0, 1.0], "trimmed_mean", 0.34, device=CPU),
        }

    assert_same(aggregate(), on_meta(aggregate))


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam"])
def test_the_server_optimizer_steps_on_the_updates_device_and_checkpoints_host_tensors(kind):
    start, deltas = update(0), [update(seed) for seed in (1, 2, 3)]

    def steps():
        optimizer = SERVER_OPTIMIZERS[kind](lr=0.5)
        weights, history = start, []
        for delta in deltas[:2]:
            weights = optimizer.step(weights, delta)
            history.append(weights)
        resumed = SERVER_OPTIMIZERS[kind](lr=0.5)
        resumed.load_state_dict(optimizer.state_dict())
        history.append(resumed.step(weights, deltas[2]))
        history.append(optimizer.step(weights, deltas[2]))
        return history, optimizer.state_dict()

    plain = steps()
    assert_same(plain, on_meta(steps))
    assert torch.equal(plain[0][2]["fc"], plain[0][3]["fc"])  # a resumed optimizer steps as the original


@pytest.mark.parametrize("name", DOWNLINK_COMPRESSORS[1:])
def test_a_compressed_download_is_made_and_applied_where_the_replica_lives(name):
    target, replica = update(1), update(0)
    config = DownlinkConfig(name=name, density=0.1)

    def download():
        made = make_download(target, replica, config, config.compressor(), torch.Generator().manual_seed(0))
        return made.payloads, made.replica

    assert_same(download(), on_meta(download))


def test_client_state_is_packed_from_wherever_it_lives():
    state = {"memory/fc": torch.zeros(40, 30).index_fill_(1, torch.tensor([3]), 1.5), "memory/bias": torch.ones(10)}
    assert_same(state, on_meta(lambda: unpack_state(pack_state(state))))


def test_on_its_own_device_the_clients_generator_is_used_as_it_is():
    g = torch.Generator().manual_seed(1)
    assert generator_on(g, CPU) is g and generator_on(None, CPU) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_draws_come_from_a_gpu_generator_seeded_by_the_clients():
    cuda = torch.device("cuda")
    first, again = (generator_on(torch.Generator().manual_seed(1), cuda) for _ in range(2))
    assert first.device.type == "cuda" and first.initial_seed() == again.initial_seed()
    rounds = [{n: t.to(cuda) for n, t in update(seed).items()} for seed in (1, 2)]
    for name in compressor_names():
        out = client_rounds(name, rounds)
        for key in ("payloads1", "sent1", "sent2", "memory"):
            assert all(t.device.type == "cuda" for t in tensors_of(out[key])
                       if t.dtype != torch.uint8), (name, key)  # packed bits are made on the host


def test_moving_a_payload_copies_only_what_is_elsewhere():
    payload = uploads("topk")[0]["fc"]
    assert payload_to(payload, "cpu") is payload
    moved = payload_to(payload, "meta")
    assert moved.indices.device.type == moved.values.device.type == "meta" and moved.shape == payload.shape


def test_a_partition_is_copied_to_a_device_once_and_never_pickled_with_it():
    data = ArrayDataset(np.arange(12, dtype=np.float32).reshape(6, 2), np.arange(6, dtype=np.int64))
    x, y = data.tensors(CPU)
    assert np.shares_memory(x.numpy(), data.x) and np.shares_memory(y.numpy(), data.y)  # no copy on the CPU
    meta = torch.device("meta")
    first = data.tensors(meta)
    assert data.tensors(meta) is first and first[0].device == meta  # copied once, then reused
    restored = pickle.loads(pickle.dumps(data))
    assert restored._copies == {} and np.array_equal(restored.x, data.x)
