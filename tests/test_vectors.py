"""The spec (docs/wire-format.md), the code and the vectors agree: every valid vector both ways bit
for bit, every rejection vector (blob and reply) with its reason, every reason the code can raise in
the document's tables and back, lowrank decoding bit-exact against a plain f32 loop, and the entry
order surviving Flower's framing."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fedgc.aggregation.server_optim import SGD
from fedgc.compress.base import CompressionContext
from fedgc.compress.config import CompressionConfig
from fedgc.compress.payloads import LowRankPayload, QuantizedPayload
from fedgc.compress.update import build_compression, compress_update
from fedgc.core.parts import SelectionPolicy
from fedgc.flower.server.strategy import FedgcStrategy
from fedgc.wire.codec import CodecError, decode_bytes, encode_bytes
from fedgc.wire.reasons import BLOB, ENVELOPE, REASONS, REPLY
from fedgc.wire.varint import encode_indices
from tests import flower_messages
from tests.flower_messages import delivered
from tests.reject_cases import blob_cases, reply_cases

ROOT = Path(__file__).parent.parent
VECTORS = Path(__file__).parent / "vectors"
VALID = sorted(VECTORS.glob("*.json"))
BLOB_REJECTS = json.loads((VECTORS / "reject" / "blob.json").read_text())["cases"]
REPLY_REJECTS = json.loads((VECTORS / "reject" / "reply.json").read_text())["replies"]


def shapes_of(vector: dict) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v) for k, v in vector["shapes"].items()}


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_vector_decodes_bit_exactly_and_reencodes(path):
    vector = json.loads(path.read_text())
    blob, shapes = bytes.fromhex(vector["hex"]), shapes_of(vector)
    decoded = decode_bytes(blob, shapes)
    for key, values in vector["decoded"].items():
        want = np.array(values, dtype="<f4").view("<u4")  # bits: −0 and +0 differ
        got = decoded[key].to_dense().flatten().numpy().astype("<f4").view("<u4")
        assert np.array_equal(got, want), (path.stem, key)
    assert encode_bytes(decoded) == blob
    if "input" in vector:
        cfg = CompressionConfig(**vector["config"])
        compressor, memory = build_compression(cfg)
        upd = {k: torch.tensor(v, dtype=torch.float32).reshape(shapes[k]) for k, v in vector["input"].items()}
        out = compress_update(upd, compressor, memory, CompressionContext(density=cfg.density),
                              dense_small_tensors=cfg.dense_small_tensors, value_dtype=cfg.value_dtype)
        assert encode_bytes(out.payloads).hex() == vector["hex"]


def test_vectors_cover_index_modes_the_tie_ranks_and_buckets():
    vectors = {p.stem: json.loads(p.read_text()) for p in VALID}
    tie = vectors["sparse_index_mode0"]
    blob, offset, modes = bytes.fromhex(tie["hex"]), 1, []
    for shape, payload in zip(tie["shapes"].values(), decode_bytes(blob, shapes_of(tie)).values()):
        n, k = int(np.prod(shape)), payload.indices.numel()
        block = encode_indices(payload.indices.numpy(), n).tobytes()
        assert blob[offset + 2: offset + 2 + len(block)] == block  # kind, dtype, then this index block
        modes.append((block[0], len(block) - 1, (n + 7) // 8))
        offset += 2 + len(block) + 4 * k
    # w: 4 of 64 (mode 0, 5 < 8 bytes); tie: 1 of 16 (mode 0, 2 = 2 bytes); bitmap: 1 of 8 (mode 1, 2 > 1)
    assert modes == [(0, 5, 8), (0, 2, 2), (1, 1, 1)]
    payloads = [p for v in vectors.values() for p in decode_bytes(bytes.fromhex(v["hex"]), shapes_of(v)).values()]
    assert {1, 2, 3} <= {p.p.shape[1] for p in payloads if isinstance(p, LowRankPayload)}
    buckets = {(p.bucket_size, int(np.prod(p.shape))) for p in payloads if isinstance(p, QuantizedPayload)}
    assert any(d > n for d, n in buckets) and any(n % d and d < n for d, n in buckets)


def test_the_stored_rejection_vectors_are_the_generated_ones():
    assert BLOB_REJECTS == json.loads(json.dumps(blob_cases()))
    assert REPLY_REJECTS == json.loads(json.dumps(reply_cases()))


@pytest.mark.parametrize("case", BLOB_REJECTS, ids=lambda c: c["name"])
def test_blob_rejection_vector(case):
    with pytest.raises(CodecError) as err:
        decode_bytes(bytes.fromhex(case["hex"]), shapes_of(case))
    assert err.value.reason == case["reason"]


def test_every_blob_and_reply_reason_has_a_rejection_vector():
    assert {c["reason"] for c in BLOB_REJECTS} == set(BLOB)
    assert {c["reason"] for c in REPLY_REJECTS} - {"ok"} == set(REPLY + ENVELOPE) | {"trailing-bytes"}


class _Nodes:
    def get_node_ids(self):
        return [1, 2, 3]


def _array(spec: dict) -> Array:
    return Array(dtype=spec["dtype"], shape=tuple(spec["shape"]), stype=spec["stype"], data=bytes.fromhex(spec["data"]))


def _value(spec: dict):
    """A record value described by its type: {"bytes": hex}, {"bytes_list": [hex, ...]}, {"str": s}, {"int": n}."""
    (kind, value), = spec.items()
    return {"bytes": bytes.fromhex, "bytes_list": lambda v: [bytes.fromhex(x) for x in v], "str": str,
            "int": int}[kind](value)


def _update_record(kind: str, spec: dict) -> ArrayRecord | ConfigRecord | MetricRecord:
    """The case's ``update`` record: an ArrayRecord of arrays, or a Config/MetricRecord of typed values."""
    if kind == "array":
        return ArrayRecord({k: _array(v) for k, v in spec.items()})
    return (ConfigRecord if kind == "config" else MetricRecord)({k: _value(v) for k, v in spec.items()})


def rejected_reason(case: dict) -> str:
    """Play the described reply to node 1 of a fresh round; the reason counted, or ``ok``."""
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    shapes = shapes_of(case)
    strategy = FedgcStrategy(shapes=shapes, policy=SelectionPolicy(fraction=1.0), total_nodes=3,
                             optimizer=SGD(), rng=np.random.default_rng(0),
                             density_for_round=lambda r: 0.5)
    if case["max_update_bytes"] is not None:  # the limit is the server's; the vector stands for a smaller one
        strategy.max_update_bytes = case["max_update_bytes"]
    weights = ArrayRecord({k: torch.zeros(s) for k, s in shapes.items()})
    sent = {m.metadata.dst_node_id: m for m in strategy.configure_train(1, weights, ConfigRecord(), _Nodes())}
    for i, m in enumerate(sent.values()):
        delivered(m, f"m{i}")
    strategy.pushed({node: m.metadata.message_id for node, m in sent.items()})
    content = RecordDict()
    if case["metrics"] is not None:
        content["metrics"] = MetricRecord(case["metrics"])
    if case["update"] is not None:
        content["update"] = _update_record(case["update_kind"], case["update"])
    reply = flower_messages.reply(sent[1], content, src_node_id=42 if case["sender"] == "unselected" else None,
                                  reply_to_message_id=None if case["reply_to"] == "sent" else case["reply_to"])
    replies = []
    if case["duplicate"]:  # the same node answered already, with a good reply
        replies.append(Message(RecordDict({"metrics": MetricRecord(dict(case["metrics"])),
                                           "update": content["update"]}), reply_to=sent[1]))
    stats = strategy.aggregate(1, [*replies, reply]).stats
    assert sum(stats.rejected.values()) <= 1
    return next(iter(stats.rejected), "ok")


@pytest.mark.parametrize("case", REPLY_REJECTS, ids=lambda c: c["name"])
def test_reply_rejection_vector(case):
    assert rejected_reason(case) == case["reason"]


# ----------------------------------------------------------------------------- reasons: code ⇔ doc


def python_reasons() -> set[str]:
    """Every reason a ``CodecError(...)`` in fedgc/ can carry: literal first arguments, and for a
    variable one the string literals passed for that parameter in the same module."""
    found = set()
    for path in (ROOT / "fedgc").rglob("*.py"):
        tree = ast.parse(path.read_text())
        passed_on = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CodecError" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant):
                    found.add(first.value)
                else:
                    passed_on.add(first.id)
            if isinstance(node, ast.JoinedStr) and "internal-error:" in ast.unparse(node):
                found.add("internal-error:<Type>")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                params = node.args.args[-len(node.args.defaults):] if node.args.defaults else []
                found |= {d.value for p, d in zip(params, node.args.defaults) if p.arg in passed_on}
                names = {a.arg for a in node.args.args} & passed_on
                for call in (c for c in ast.walk(tree) if isinstance(c, ast.Call)
                             and getattr(c.func, "id", None) == node.name):
                    position = [a.arg for a in node.args.args]
                    for name in names:
                        i = position.index(name)
                        args = call.args[i:i + 1] + [k.value for k in call.keywords if k.arg == name]
                        found |= {a.value for a in args if isinstance(a, ast.Constant)}
    return found


def java_reasons() -> set[str]:
    sources = (ROOT / "clients" / "jvm" / "src" / "main" / "java").rglob("*.java")
    return {m for path in sources for m in re.findall(r'new CodecException\("([^"]+)"', path.read_text())}


def doc_reasons() -> set[str]:
    text = (ROOT / "docs" / "wire-format.md").read_text()
    return set(re.findall(r"^\| `([a-z-]+(?::<Type>)?)` \|", text, flags=re.MULTILINE))


def test_every_reason_the_code_raises_is_in_the_docs_table_and_back():
    assert python_reasons() == set(REASONS)
    assert doc_reasons() == set(REASONS)
    assert java_reasons() == set(BLOB + ENVELOPE)


def test_extraction_sees_the_reasons_passed_through_a_parameter():
    assert {"bad-num-examples", "bad-metrics", "internal-error:<Type>", "stale-reply"} <= python_reasons()


# ----------------------------------------------------------------------------- lowrank, order


def reference_lowrank(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The spec's loop, one f32 scalar operation at a time."""
    out = np.zeros((p.shape[0], q.shape[0]), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(p.shape[0]):
            for j in range(q.shape[0]):
                acc = np.float32(0.0)
                for t in range(p.shape[1]):
                    acc = np.float32(acc + np.float32(p[i, t] * q[j, t]))
                out[i, j] = acc
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_lowrank_decoding_is_the_specified_f32_loop(dtype):
    g = torch.Generator().manual_seed(3)
    for rank, rows, cols in ((2, 9, 7), (4, 16, 11), (7, 8, 40)):
        scale = torch.logspace(-3, 6, rank, dtype=torch.float32)
        p = (torch.randn(rows, rank, generator=g) * scale).to(dtype)
        q = (torch.randn(cols, rank, generator=g) * scale.flip(0)).to(dtype)
        got = LowRankPayload(p=p, q=q, shape=(rows, cols)).to_dense().numpy()
        want = reference_lowrank(p.float().numpy(), q.float().numpy())
        assert np.array_equal(got.view("<u4"), want.view("<u4"))


def test_array_record_key_order_survives_flowers_framing():
    """The entry order is the key order of the train message's ``arrays`` (buffers included)."""
    keys = ["z.weight", "a.running_mean", "m.bias", "a.num_batches_tracked", "b.weight"]
    record = ArrayRecord({k: torch.zeros(i + 1) for i, k in enumerate(keys)})
    inflated = ArrayRecord.inflate(record.deflate(), children=record.children)
    assert list(inflated) == keys == list(inflated.to_torch_state_dict())
