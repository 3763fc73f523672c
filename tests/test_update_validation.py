"""The server's trust boundary: every malformed reply is rejected and counted, and the global model
is bit-identical to the model aggregated from the valid replies alone."""

from __future__ import annotations

import resource

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fedgc.aggregation import aggregators as aggregators_module
from fedgc.aggregation.server_optim import SGD
from fedgc.compress.base import DensePayload, SparsePayload
from fedgc.compress.bits import pack_uint
from fedgc.core.parts import SelectionPolicy
from fedgc.flower.server import strategy as strategy_module
from fedgc.flower.server.strategy import Diverged, FedgcStrategy
from fedgc.flower.update_record import encode_update
from fedgc.wire.varint import encode_varints
from tests import flower_messages
from tests.flower_messages import delivered

SHAPES = {"w": (4, 5), "b": (5,)}


class ThreeNodes:
    """The smallest real Grid surface the strategy reads: the node ids."""

    def get_node_ids(self):
        return [1, 2, 3]


def make_strategy(**kwargs) -> FedgcStrategy:
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    return FedgcStrategy(shapes=SHAPES, policy=SelectionPolicy(fraction=1.0), total_nodes=3,
                         optimizer=SGD(), rng=np.random.default_rng(0),
                         density_for_round=lambda r: 0.5, **kwargs)


def start_round(strategy: FedgcStrategy, server_round: int = 1) -> dict[int, Message]:
    """configure_train, then what a grid does when it pushes (a message id for each message) and what the
    loop tells the strategy (those ids)."""
    weights = ArrayRecord({"w": torch.zeros(4, 5), "b": torch.zeros(5)})
    messages = strategy.configure_train(server_round, weights, ConfigRecord(), ThreeNodes())
    for i, m in enumerate(messages):
        delivered(m, f"r{server_round}m{i}")
    strategy.pushed({m.metadata.dst_node_id: m.metadata.message_id for m in messages})  # the ids the grid returned
    return {m.metadata.dst_node_id: m for m in messages}


def good_update(seed: int) -> ArrayRecord:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(20, generator=g)
    return encode_update({"w": SparsePayload(torch.tensor([0, 3, 7, 19]), w[[0, 3, 7, 19]], (4, 5)),
                          "b": DensePayload(torch.randn(5, generator=g), (5,))})


def reply(to: Message, update: ArrayRecord | None, num_examples=10, src_node_id: int | None = None, **metrics) -> Message:
    content = RecordDict({"metrics": MetricRecord({"num-examples": num_examples, "train-loss": 0.5, **metrics})})
    if update is not None:
        content["update"] = update
    return flower_messages.reply(to, content, src_node_id=src_node_id)


def blob(record: ArrayRecord) -> np.ndarray:
    return record["update"].numpy().copy()


def as_record(data: np.ndarray, key: str = "update") -> ArrayRecord:
    return ArrayRecord({key: Array(data)})


def qsgd_blob(bucket: int | None = None, bucket_varint: list[int] | None = None) -> np.ndarray:
    """A dense ``w`` and a qsgd ``b`` (s = 1, one bucket) whose bucket size is ``bucket`` (encoded) or
    the raw ``bucket_varint`` bytes."""
    head = blob(encode_update({"w": DensePayload(torch.ones(20), (4, 5)), "b": DensePayload(torch.zeros(5), (5,))}))
    w_entry = head[: 1 + 2 + 80]  # version, kind + dtype, 20 f32
    if bucket_varint is None:
        bucket_varint = list(encode_varints(np.array([bucket], dtype=np.uint64)))
    codes = pack_uint(torch.tensor([2, 0, 1, 2, 2]), 2).numpy()  # levels +1 −1 0 +1 +1
    b_entry = np.concatenate([[5, 1], bucket_varint, np.frombuffer(np.float32(3.0).tobytes(), np.uint8), codes])
    return np.concatenate([w_entry, b_entry]).astype(np.uint8)


def bad_updates():
    good = blob(good_update(99))
    nan_dense = encode_update({"w": DensePayload(torch.zeros(20), (4, 5)),
                               "b": DensePayload(torch.tensor([1.0, float("nan"), 0, 0, 0]), (5,))})
    wrong_shape = encode_update({"w": DensePayload(torch.zeros(19), (19,)), "b": DensePayload(torch.zeros(5), (5,))})
    bad_version = good.copy()
    bad_version[0] = 99
    bad_kind = good.copy()
    bad_kind[1] = 250
    return {
        "truncated": (as_record(good[:-3]), {}),
        "trailing-bytes": (as_record(np.concatenate([good, [0, 0]]).astype(np.uint8)), {}),
        "bad-version": (as_record(bad_version), {}),
        "bad-kind": (as_record(bad_kind), {}),
        "non-finite": (nan_dense, {}),
        "wrong-shape": (wrong_shape, {}),
        "bad-dtype": (as_record(good.astype(np.int32)), {}),
        "extra-array": (ArrayRecord({"update": Array(good), "extra": Array(np.ones(3, dtype=np.float32))}), {}),
        "zero-examples": (good_update(99), {"num_examples": 0}),
        "huge-examples": (good_update(99), {"num_examples": 10**12}),
        "nan-loss": (good_update(99), {"train-loss": float("nan")}),
        "no-update": (None, {}),
        "fractional-examples": (good_update(99), {"num_examples": 0.5}),
        "non-integer-examples": (good_update(99), {"num_examples": 10.5}),
        "negative-loss": (good_update(99), {"train-loss": -1.0}),
        "lying-elements-sent": (good_update(99), {"elements-sent": 25}),
        "lying-elements-total": (good_update(99), {"elements-total": 10**9}),
        "impossible-samples": (good_update(99), {"steps": 2, "samples": 10**6}),
        "list-metric": (good_update(99), {"samples": [1, 2]}),
        "nan-norm": (good_update(99), {"norm-before-clip": float("nan"), "norm-after-clip": 1.0}),
        "negative-norm": (good_update(99), {"norm-before-clip": 1.0, "norm-after-clip": -1.0}),
        "one-norm-only": (good_update(99), {"norm-before-clip": 1.0}),
        "clipping-grew-the-norm": (good_update(99), {"norm-before-clip": 1.0, "norm-after-clip": 2.0}),
        "varint-over-64-bits": (as_record(qsgd_blob(bucket_varint=[0xFF] * 9 + [0x02])), {}),
        "varint-over-10-bytes": (as_record(qsgd_blob(bucket_varint=[0xFF] * 11)), {}),
    }


def aggregate(strategy, replies):
    """The new global model and what the strategy did with the replies."""
    report = strategy.aggregate(1, replies)
    return report.weights, report.stats


@pytest.mark.parametrize("case", list(bad_updates()))
def test_a_malformed_reply_is_rejected_and_the_model_ignores_it(case):
    update, overrides = bad_updates()[case]
    reference_strategy = make_strategy()
    messages = start_round(reference_strategy)
    valid = [reply(messages[1], good_update(1)), reply(messages[2], good_update(2))]
    expected, stats = aggregate(reference_strategy, valid)

    strategy = make_strategy()
    messages = start_round(strategy)
    kwargs = {"num_examples": overrides.pop("num_examples", 10), **overrides}
    replies = [reply(messages[1], good_update(1)), reply(messages[3], update, **kwargs),
               reply(messages[2], good_update(2))]
    result, stats = aggregate(strategy, replies)
    assert sum(stats.rejected.values()) == 1, stats.rejected
    assert stats.applied_nodes == [1, 2]
    for name in expected:
        assert torch.equal(result[name], expected[name]), name


def test_reasons_are_named():
    strategy = make_strategy()
    messages = start_round(strategy)
    infinite = encode_update({"w": DensePayload(torch.zeros(20), (4, 5)), "b": DensePayload(torch.full((5,), np.inf), (5,))})
    replies = [reply(messages[1], good_update(1)), reply(messages[1], good_update(2)), reply(messages[2], infinite)]
    stats = strategy.aggregate(1, replies).stats
    assert dict(stats.rejected) == {"duplicate-reply": 1, "non-finite": 1}


def test_reply_from_a_node_not_selected_is_rejected():
    strategy = make_strategy()
    messages = start_round(strategy)
    stranger = reply(messages[1], good_update(3), src_node_id=42)
    stats = strategy.aggregate(1, [reply(messages[2], good_update(1)), stranger]).stats
    assert dict(stats.rejected) == {"unexpected-sender": 1}


def test_norm_bounding_limits_a_huge_but_finite_update():
    strategy = make_strategy(clip_update_norm=1.0)
    messages = start_round(strategy)
    huge = encode_update({"w": DensePayload(torch.full((20,), 1e6), (4, 5)), "b": DensePayload(torch.zeros(5), (5,))})
    result, _stats = aggregate(strategy, [reply(messages[1], huge)])
    assert torch.linalg.vector_norm(result["w"]) == pytest.approx(1.0, rel=1e-5)


def test_a_non_finite_global_model_stops_the_run():
    strategy = make_strategy()
    strategy.optimizer.lr = 10.0  # 10 × 3e38 overflows fp32
    messages = start_round(strategy)
    overflow = encode_update({"w": DensePayload(torch.full((20,), 3e38), (4, 5)),
                              "b": DensePayload(torch.zeros(5), (5,))})
    with pytest.raises(Diverged):
        strategy.aggregate(1, [reply(messages[1], overflow), reply(messages[2], overflow)])


@pytest.mark.parametrize("bucket", [2**63, 2**40, 10**8, 2**64 - 1, 5, 6])
def test_a_qsgd_bucket_longer_than_the_tensor_is_one_bucket_and_allocates_nothing_by_it(bucket):
    """Today's main ran norms.repeat_interleave(d): ValueError, RuntimeError or 400 MB for 5 entries."""
    strategy = make_strategy()
    messages = start_round(strategy)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result, stats = aggregate(strategy, [reply(messages[1], as_record(qsgd_blob(bucket)))])
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 100_000  # no 400 MB for d = 1e8
    assert dict(stats.rejected) == {}
    assert torch.equal(result["b"], -torch.tensor([1.0, -1.0, 0.0, 1.0, 1.0]) * 3.0)  # sgd: w − Δ


def test_a_round_whose_only_reply_claims_half_an_example_is_skipped_not_a_crash():
    strategy = make_strategy()
    messages = start_round(strategy)
    report = strategy.aggregate(1, [reply(messages[1], good_update(1), num_examples=0.5)])
    stats = report.stats
    assert report.weights is None and stats.skipped
    assert dict(stats.rejected) == {"bad-num-examples": 1}


def test_a_reply_to_an_earlier_round_is_rejected_as_stale():
    strategy = make_strategy()
    first = start_round(strategy, 1)
    stats = strategy.aggregate(1, [reply(m, good_update(n)) for n, m in first.items()]).stats
    second = start_round(strategy, 2)
    replayed = reply(first[1], good_update(1))  # node 1's round-1 reply, delivered again in round 2
    stats = strategy.aggregate(2, [replayed, reply(second[2], good_update(2))]).stats
    assert dict(stats.rejected) == {"stale-reply": 1}
    assert stats.applied_nodes == [2]


def test_any_exception_while_validating_a_reply_rejects_only_that_reply(monkeypatch):
    reference = make_strategy()
    messages = start_round(reference)
    expected, stats = aggregate(reference, [reply(messages[1], good_update(1)), reply(messages[2], good_update(2))])

    real_decode = strategy_module.decode_update

    def decode(record, shapes):
        if np.array_equal(record["update"].numpy(), blob(good_update(3))):
            raise MemoryError("4 TB")
        return real_decode(record, shapes)

    monkeypatch.setattr(strategy_module, "decode_update", decode)
    strategy = make_strategy()
    messages = start_round(strategy)
    result, stats = aggregate(strategy, [reply(messages[1], good_update(1)), reply(messages[3], good_update(3)),
                                  reply(messages[2], good_update(2))])
    assert dict(stats.rejected) == {"internal-error:MemoryError": 1}
    for name in expected:
        assert torch.equal(result[name], expected[name]), name


def test_an_update_that_cannot_be_aggregated_is_rejected_and_the_rest_aggregated(monkeypatch):
    reference = make_strategy()
    messages = start_round(reference)
    expected, stats = aggregate(reference, [reply(messages[1], good_update(1)), reply(messages[2], good_update(2))])

    real_aggregate = strategy_module.aggregate_payloads
    poisoned = blob(good_update(3))

    def aggregate_payloads(updates, shapes, scales=None, device=None):
        for _, payloads in updates:
            if torch.equal(payloads["b"].values, strategy_module.decode_update(as_record(poisoned), SHAPES)["b"].values):
                raise IndexError("a defect in aggregation")
        return real_aggregate(updates, shapes, scales, device)

    monkeypatch.setattr(strategy_module, "aggregate_payloads", aggregate_payloads)  # the one-by-one search
    monkeypatch.setattr(aggregators_module, "aggregate_payloads", aggregate_payloads)  # the mean rule
    strategy = make_strategy(max_weight_share=1.0, norm_bound_factor=None)
    messages = start_round(strategy)
    result, stats = aggregate(strategy, [reply(messages[1], good_update(1)), reply(messages[3], good_update(3)),
                                  reply(messages[2], good_update(2))])
    assert dict(stats.rejected) == {"internal-error:IndexError": 1}
    assert stats.applied_nodes == [1, 2]
    for name in expected:
        assert torch.equal(result[name], expected[name]), name


def test_achieved_density_is_counted_from_the_decoded_update_not_the_claims():
    strategy = make_strategy()
    messages = start_round(strategy)
    stats = strategy.aggregate(1, [reply(messages[1], good_update(1))]).stats  # no elements-* metrics at all
    assert stats.achieved_density == (4 + 5) / 25


def test_a_client_claiming_ten_million_examples_gets_half_the_weight():
    strategy = make_strategy()
    messages = start_round(strategy)
    result, stats = aggregate(strategy, [reply(messages[1], good_update(1), num_examples=10_000_000),
                                  reply(messages[2], good_update(2)), reply(messages[3], good_update(3))])
    assert stats.capped_nodes == [1]
    parts = [aggregate(make_and_start(), [reply(make_and_start.last[n], good_update(n))])[0] for n in (1, 2, 3)]
    for name in result:  # sgd: the model is −Δ; Δ = ½·u₁ + ¼·u₂ + ¼·u₃
        assert torch.allclose(result[name], 0.5 * parts[0][name] + 0.25 * parts[1][name] + 0.25 * parts[2][name],
                              atol=1e-6)


def make_and_start() -> FedgcStrategy:
    strategy = make_strategy()
    make_and_start.last = start_round(strategy)
    return strategy


def test_a_claim_of_more_samples_than_the_server_asked_for_is_rejected():
    """``steps = samples = 2^62`` passes the self-consistency checks (one example per step); the server
    asked for at most 48 samples (3 steps of 16), so the reply is rejected as bad-metrics."""
    strategy = make_strategy(max_samples=48)
    messages = start_round(strategy)
    replies = [reply(messages[1], good_update(1), num_examples=16, steps=3, samples=48),
               reply(messages[3], good_update(3), steps=2**62, samples=2**62),
               reply(messages[2], good_update(2), num_examples=17, steps=3, samples=49)]
    _, stats = aggregate(strategy, replies)
    assert stats.applied_nodes == [1] and stats.rejected == {"bad-metrics": 2}


@pytest.mark.parametrize("extra", ["array", "config", "metrics"])
def test_a_reply_carrying_megabytes_beside_its_update_is_rejected_as_too_large(extra):
    """Only the update was bounded: a reply with 3 MB of extra records was accepted and applied."""
    from flwr.app import ConfigRecord as Config

    strategy = make_strategy()
    messages = start_round(strategy)
    bloated = reply(messages[3], good_update(3))
    if extra == "array":
        bloated.content["junk"] = ArrayRecord({"x": Array(np.ones(3_000_000 // 4, dtype=np.float32))})
    elif extra == "config":
        bloated.content["junk"] = Config({"x": b"\0" * 3_000_000})
    else:
        bloated.content["junk"] = MetricRecord({"x": [1.0] * 400_000})
    _, stats = aggregate(strategy, [reply(messages[1], good_update(1)), bloated, reply(messages[2], good_update(2))])
    assert stats.applied_nodes == [1, 2] and stats.rejected == {"too-large": 1}
