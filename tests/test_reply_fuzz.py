"""Structure-aware fuzzing of the server's trust boundary: the update decoder and the strategy.

Blobs are built field by field for every payload kind, with extreme values in every field (dtype and
kind bytes, varints from 0 to past 2**64, counts around n, floats from ±0 to ±Inf and NaN, bit and
trit padding), then truncated, extended or mutated; the test vectors in tests/vectors are mutated too.
Whatever the bytes, decoding either raises ``CodecError`` or gives finite tensors of the right shape;
it never allocates more than a few times the parameter's size (numpy allocations measured with
tracemalloc; the tensors it returns are checked). The strategy, fed such replies with made-up metrics,
never raises: every reply is applied or rejected with a counted reason. Seeds are fixed (the
deterministic profile in conftest.py), so CI sees the same cases on every run.
"""

from __future__ import annotations

import json
import math
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgc.aggregation.server_optim import SGD
from fedgc.core.parts import SelectionPolicy
from fedgc.flower.server.strategy import Diverged, FedgcStrategy
from fedgc.wire.codec import CodecError, decode_bytes
from fedgc.wire.varint import encode_varints
from tests.flower_messages import delivered, instruction, reply

VECTORS = [json.loads(p.read_text()) for p in sorted((Path(__file__).parent / "vectors").glob("*.json"))]
SHAPE_POOL = [(2, 6), (3,), (), (0,), (4, 33), (1, 1), (7,), (5, 0, 2)]
HEADROOM = 64 * 1024  # bytes: interpreter and numpy bookkeeping that does not grow with the data
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))

EXTREME_VARINTS = [0, 1, 2, 3, 7, 8, 127, 128, 255, 32767, 32768, 2**31, 2**32, 2**40, 10**8, 2**63, 2**64 - 1]
EXTREME_F32 = [0.0, -0.0, 1.0, -1.0, 1e-45, 1.17549435e-38, 3.4028234e38, -3.4028234e38, 65504.0, 1e30,
               float("inf"), float("-inf"), float("nan")]


def rarely(draw, p: float = 0.1) -> bool:
    """True with probability about ``p``: most fields are drawn valid, so the fuzzer gets past them."""
    # Hypothesis favours boundary integers (0, the maximum): scramble them away from the rare range.
    return (draw(st.integers(0, 999)) * 7919 + 500) % 1000 < p * 1000


def f32(value: float) -> bytes:
    return struct.pack("<f", value)


def f16(value: float) -> bytes:
    with np.errstate(over="ignore"):  # beyond fp16's range: ±Inf on the wire, as an overflowing client would send
        return np.array([value], dtype=np.float32).astype(np.float16).tobytes()


@st.composite
def varint(draw, n: int) -> bytes:
    """A varint around ``n`` or an extreme one, or raw bytes that overflow 64 bits or run past 10."""
    choice = draw(st.integers(0, 9)) if rarely(draw, 0.4) else 9
    if choice == 0:
        return bytes([0xFF] * draw(st.integers(10, 13)) + [draw(st.integers(0, 127))])
    if choice == 1:
        return bytes([0xFF] * 9 + [draw(st.integers(2, 127))])  # ≥ 2**64
    if choice == 2:
        return bytes([0x80] * draw(st.integers(1, 9)) + [0])  # zero, not in its shortest form
    near = [max(n - 1, 0), n, n + 1, 2 * n]
    value = draw(st.sampled_from(EXTREME_VARINTS + near) if choice < 9 else st.sampled_from(near) | st.integers(0, 2 * n + 1))
    return bytes(encode_varints(np.array([value], dtype=np.uint64)))


@st.composite
def floats(draw, count: int, dtype: int = 0) -> bytes:
    pack = f32 if dtype != 1 else f16
    extreme = rarely(draw, 0.3)
    values = [draw(st.floats(0.0, 10.0, width=32)) for _ in range(min(count, 8))]
    if extreme:
        values[draw(st.integers(0, max(len(values) - 1, 0))):] = [draw(st.sampled_from(EXTREME_F32))]
    values = (values * (count // max(len(values), 1) + 1))[:count]
    if rarely(draw, 0.05):
        values = values[: draw(st.integers(0, count))]  # too few
    return b"".join(pack(v) for v in values)


@st.composite
def bits(draw, count: int, width: int = 1) -> bytes:
    flags = np.array(draw(st.lists(st.integers(0, 1), min_size=count * width, max_size=count * width)), np.uint8)
    data = np.packbits(flags, bitorder="little").tobytes()
    if rarely(draw):  # set padding bits, or a byte too many or too few
        data = draw(st.sampled_from([data + b"\x00", data[:-1], data[:-1] + b"\xff"]))
    return data


@st.composite
def index_block(draw, n: int) -> bytes:
    mode = draw(st.sampled_from([2, 255])) if rarely(draw, 0.05) else draw(st.integers(0, 1))
    if mode == 1:
        return bytes([1]) + draw(bits(n))
    count = draw(st.sampled_from([0, 1, n, n + 1, 2**63]) if rarely(draw) else st.integers(0, max(n // 2, 1)))
    gaps = b"".join(draw(varint(n)) if rarely(draw) else bytes([draw(st.integers(0, 2))])
                    for _ in range(min(count, n + 2)))
    return bytes([mode]) + bytes(encode_varints(np.array([count], dtype=np.uint64))) + gaps


@st.composite
def entry(draw, shape: tuple[int, ...]) -> bytes:
    """One parameter's entry: a kind byte (mostly valid) and a body with fields drawn at the extremes."""
    n = math.prod(shape)
    kind = draw(st.sampled_from([9, 127, 255])) if rarely(draw, 0.03) else draw(st.integers(0, 8))
    dtype = draw(st.sampled_from([2, 255])) if rarely(draw, 0.03) else draw(st.integers(0, 1))
    rows = shape[0] if shape else 1
    body: bytes
    if kind == 0:
        body = bytes([dtype]) + draw(floats(n, dtype))
    elif kind == 1:
        block = draw(index_block(n))
        body = bytes([dtype]) + block + draw(floats(draw(st.integers(0, n + 1)), dtype))
    elif kind in (2, 3):
        body = draw(floats(2 if kind == 2 else 1)) + draw(bits(n))
    elif kind == 4:
        trits = draw(st.lists(st.integers(0, 2), min_size=-(-n // 5) * 5, max_size=-(-n // 5) * 5))
        trits[n:] = [0] * (len(trits) - n) if not rarely(draw) else trits[n:]
        packed = [sum(t * 3**i for i, t in enumerate(trits[j : j + 5])) for j in range(0, len(trits), 5)]
        if rarely(draw, 0.05):
            packed.append(draw(st.integers(0, 255)))
        body = draw(floats(1)) + bytes(packed)
    elif kind == 5:
        s = draw(st.sampled_from([1, 3, 15, 32767]))
        levels = draw(varint(s)) if rarely(draw) else bytes(encode_varints(np.array([s], dtype=np.uint64)))
        d = draw(st.sampled_from([1, 2, 3, max(n, 1), n + 1, 512, 10**8, 2**40, 2**63, 2**64 - 1]))
        bucket = draw(varint(n)) if rarely(draw) else bytes(encode_varints(np.array([d], dtype=np.uint64)))
        norms = -(-n // d) if not rarely(draw) else draw(st.integers(0, n + 2))
        codes = draw(st.lists(st.integers(0, 2 * s), min_size=n, max_size=n))
        width = (2 * s).bit_length()
        flags = np.array([(c >> i) & 1 for c in codes for i in range(width)], dtype=np.uint8)
        body = levels + bucket + draw(floats(norms)) + np.packbits(flags, bitorder="little").tobytes()
    elif kind == 6:
        top = 255 if rarely(draw) else 254
        body = bytes(draw(st.lists(st.integers(0, top), min_size=n, max_size=n))) + draw(bits(n))
    elif kind == 7:
        rank = draw(st.integers(0, 3)) if rarely(draw) else 1
        body = (bytes([dtype]) + draw(varint(rank)) + draw(floats(rows * rank, dtype))
                + draw(floats(max(n // max(rows, 1), 1) * rank, dtype)))
    else:
        block = draw(index_block(n))
        k = block_count(block, n)
        body = draw(floats(1)) + block + draw(bits(k if k is not None and not rarely(draw) else draw(st.integers(0, n))))
    return bytes([kind]) + body


def block_count(block: bytes, n: int) -> int | None:
    """k of an index block, when it decodes."""
    from fedgc.wire.varint import IndexCodingError, decode_indices

    try:
        return int(decode_indices(np.frombuffer(block, np.uint8), n)[0].size)
    except IndexCodingError:
        return None


@st.composite
def blobs(draw) -> tuple[bytes, dict[str, tuple[int, ...]]]:
    shapes = {f"p{i}": shape for i, shape in enumerate(draw(st.lists(st.sampled_from(SHAPE_POOL), min_size=1,
                                                                       max_size=3)))}
    data = bytes([draw(st.sampled_from([0, 2, 255]))]) if rarely(draw, 0.03) else b"\x01"
    data += b"".join(draw(entry(shape)) for shape in shapes.values())
    edit = draw(st.integers(0, 4)) if rarely(draw, 0.4) else 0
    if edit == 1 and data:  # truncate
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif edit == 2:  # trailing bytes
        data += draw(st.binary(min_size=1, max_size=16))
    elif edit == 3 and data:  # overwrite a few bytes
        buffer = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            buffer[draw(st.integers(0, len(buffer) - 1))] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
        data = bytes(buffer)
    return data, shapes


def check_decode(data: bytes, shapes: dict[str, tuple[int, ...]]) -> None:
    """Decode: CodecError or finite tensors of the right shapes, allocating a few times the model at most."""
    model_bytes = 4 * sum(math.prod(s) for s in shapes.values())
    tracemalloc.start()
    try:
        payloads = decode_bytes(data, shapes)
    except CodecError as err:
        assert err.reason
        payloads = None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak <= HEADROOM + 16 * (model_bytes + len(data)), f"decoding {len(data)} bytes allocated {peak}"
    if payloads is None:
        return
    for name, shape in shapes.items():
        payload = payloads[name]
        held = sum(v.numel() * v.element_size() for v in vars(payload).values() if isinstance(v, torch.Tensor))
        assert held <= 8 * math.prod(shape) + len(data), (name, held)
        dense = payload.to_dense()
        assert dense.shape == shape and dense.dtype == torch.float32 and torch.isfinite(dense).all()


@SETTINGS
@given(blobs())
def test_structured_blobs_decode_or_are_rejected_with_codec_error(case):
    check_decode(*case)


@SETTINGS
@given(st.sampled_from(VECTORS), st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(
    ["set", "insert", "delete", "truncate", "flip"]), st.integers(0, 255)), min_size=1, max_size=4))
def test_mutated_test_vectors_decode_or_are_rejected_with_codec_error(vector, edits):
    data = bytearray.fromhex(vector["hex"])
    for position, op, byte in edits:
        at = position % (len(data) + 1)
        if op == "insert":
            data[at:at] = bytes([byte])
        elif op == "truncate":
            del data[at:]
        elif data and at < len(data):
            if op == "set":
                data[at] = byte
            elif op == "delete":
                del data[at]
            else:
                data[at] ^= 1 << (byte % 8)
    check_decode(bytes(data), {k: tuple(v) for k, v in vector["shapes"].items()})


METRIC_VALUES = st.sampled_from([0, 1, 10, -1, 0.5, 10.0, 1e300, -0.0, 2**62, True, float("nan"), float("inf"),
                                 [1, 2], [0.5]]) | st.integers(-(2**63), 2**63 - 1)
METRIC_KEYS = ["num-examples", "train-loss", "samples", "steps", "elements-sent", "elements-total"]
VECTOR_SHAPES = {k: tuple(v) for k, v in VECTORS[0]["shapes"].items()}


class Nodes:
    def get_node_ids(self):
        return [1, 2, 3, 4]


@st.composite
def replies(draw):
    """Per node: a blob (a vector as is, mutated, or structured junk), metrics from the extremes, and who
    it claims to answer (this round's message, another node's, an earlier one)."""
    out = []
    for node in (1, 2, 3, 4):
        vector = draw(st.sampled_from(VECTORS))
        data = bytearray.fromhex(vector["hex"])
        if draw(st.booleans()):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        metrics = {"num-examples": draw(st.integers(1, 100) | METRIC_VALUES), "train-loss": 0.5}
        for key in draw(st.lists(st.sampled_from(METRIC_KEYS), max_size=3)):
            metrics[key] = draw(METRIC_VALUES)
        answers = draw(st.sampled_from([node, node, node, 1, 0]))  # 0: a message of an earlier round
        array = Array(np.frombuffer(bytes(data), dtype=np.uint8).copy())
        if draw(st.integers(0, 9)) == 0:
            array = Array(np.frombuffer(bytes(data), dtype=np.uint8).astype(np.float32))
        out.append((node, answers, array, metrics))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(replies())
def test_the_strategy_applies_or_rejects_every_reply_and_never_raises(cases):
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    strategy = FedgcStrategy(shapes=VECTOR_SHAPES, policy=SelectionPolicy(fraction=1.0), total_nodes=4,
                             optimizer=SGD(), rng=np.random.default_rng(0), density_for_round=lambda r: 0.5)
    weights = ArrayRecord({k: torch.zeros(s) for k, s in VECTOR_SHAPES.items()})
    old = instruction(RecordDict({"config": ConfigRecord()}), dst_node_id=1, message_type="train", message_id="earlier")
    sent = {m.metadata.dst_node_id: m for m in strategy.configure_train(1, weights, ConfigRecord(), Nodes())}
    for node, message in sent.items():
        delivered(message, f"m{node}")
    strategy.pushed({node: message.metadata.message_id for node, message in sent.items()})
    messages = []
    for node, answers, array, metrics in cases:
        to = sent[answers] if answers else old
        try:
            record = MetricRecord(metrics)
        except (TypeError, ValueError):  # Flower itself refuses to carry it
            record = MetricRecord({"num-examples": 1})
        messages.append(reply(to, RecordDict({"update": ArrayRecord({"update": array}), "metrics": record}),
                              src_node_id=node))
    try:
        report = strategy.aggregate(1, messages)
    except Diverged:  # finite updates whose weighted sum overflows f32: the run's documented stop (exit 3)
        return
    stats, weights = report.stats, report.weights
    assert stats.received == 4 == len(stats.applied_nodes) + sum(stats.rejected.values())
    assert not any(reason.startswith("internal-error") for reason in stats.rejected), stats.rejected
    if weights is not None:
        assert all(torch.isfinite(t).all() for t in weights.values())
