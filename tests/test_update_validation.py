"""The server's trust boundary: every malformed reply is rejected and counted, and the global model
is bit-identical to the model aggregated from the valid replies alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fedgc.compress.base import DensePayload, SparsePayload
from fedgc.flower.codec import encode_update
from fedgc.flower.strategy import Diverged, FedgcStrategy, SelectionPolicy
from fedgc.server_optim import ServerOptimizer

SHAPES = {"w": (4, 5), "b": (5,)}


class ThreeNodes:
    """The smallest real Grid surface the strategy reads: the node ids."""

    def get_node_ids(self):
        return [1, 2, 3]


def make_strategy(**kwargs) -> FedgcStrategy:
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    return FedgcStrategy(shapes=SHAPES, policy=SelectionPolicy(fraction=1.0), total_nodes=3,
                         optimizer=ServerOptimizer(), rng=np.random.default_rng(0),
                         density_for_round=lambda r: 0.5, **kwargs)


def start_round(strategy: FedgcStrategy) -> dict[int, Message]:
    weights = ArrayRecord({"w": torch.zeros(4, 5), "b": torch.zeros(5)})
    messages = strategy.configure_train(1, weights, ConfigRecord(), ThreeNodes())
    for i, m in enumerate(messages):
        m.metadata.__dict__["_message_id"] = f"m{i}"
    return {m.metadata.dst_node_id: m for m in messages}


def good_update(seed: int) -> ArrayRecord:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(20, generator=g)
    return encode_update({"w": SparsePayload(torch.tensor([0, 3, 7, 19]), w[[0, 3, 7, 19]], (4, 5)),
                          "b": DensePayload(torch.randn(5, generator=g), (5,))})


def reply(to: Message, update: ArrayRecord | None, num_examples=10, **metrics) -> Message:
    content = RecordDict({"metrics": MetricRecord({"num-examples": num_examples, "train-loss": 0.5, **metrics})})
    if update is not None:
        content["update"] = update
    return Message(content, reply_to=to)


def blob(record: ArrayRecord) -> np.ndarray:
    return record["update"].numpy().copy()


def as_record(data: np.ndarray, key: str = "update") -> ArrayRecord:
    return ArrayRecord({key: Array(data)})


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
    }


def aggregate(strategy, replies):
    arrays, _ = strategy.aggregate_train(1, replies)
    return arrays.to_torch_state_dict()


@pytest.mark.parametrize("case", list(bad_updates()))
def test_a_malformed_reply_is_rejected_and_the_model_ignores_it(case):
    update, overrides = bad_updates()[case]
    reference_strategy = make_strategy()
    messages = start_round(reference_strategy)
    valid = [reply(messages[1], good_update(1)), reply(messages[2], good_update(2))]
    expected = aggregate(reference_strategy, valid)

    strategy = make_strategy()
    messages = start_round(strategy)
    kwargs = {"num_examples": overrides.pop("num_examples", 10), **overrides}
    replies = [reply(messages[1], good_update(1)), reply(messages[3], update, **kwargs),
               reply(messages[2], good_update(2))]
    result = aggregate(strategy, replies)
    assert sum(strategy.last_stats.rejected.values()) == 1, strategy.last_stats.rejected
    assert strategy.last_stats.applied_nodes == [1, 2]
    for name in expected:
        assert torch.equal(result[name], expected[name]), name


def test_reasons_are_named():
    strategy = make_strategy()
    messages = start_round(strategy)
    infinite = encode_update({"w": DensePayload(torch.zeros(20), (4, 5)), "b": DensePayload(torch.full((5,), np.inf), (5,))})
    replies = [reply(messages[1], good_update(1)), reply(messages[1], good_update(2)), reply(messages[2], infinite)]
    strategy.aggregate_train(1, replies)
    assert dict(strategy.last_stats.rejected) == {"duplicate-reply": 1, "non-finite": 1}


def test_reply_from_a_node_not_selected_is_rejected():
    strategy = make_strategy()
    messages = start_round(strategy)
    stranger = reply(messages[1], good_update(3))
    stranger.metadata.__dict__["_src_node_id"] = 42
    strategy.aggregate_train(1, [reply(messages[2], good_update(1)), stranger])
    assert dict(strategy.last_stats.rejected) == {"unexpected-sender": 1}


def test_norm_bounding_limits_a_huge_but_finite_update():
    strategy = make_strategy(clip_update_norm=1.0)
    messages = start_round(strategy)
    huge = encode_update({"w": DensePayload(torch.full((20,), 1e6), (4, 5)), "b": DensePayload(torch.zeros(5), (5,))})
    result = aggregate(strategy, [reply(messages[1], huge)])
    assert torch.linalg.vector_norm(result["w"]) == pytest.approx(1.0, rel=1e-5)


def test_a_non_finite_global_model_stops_the_run():
    strategy = make_strategy()
    strategy.optimizer.lr = 10.0  # 10 × 3e38 overflows fp32
    messages = start_round(strategy)
    overflow = encode_update({"w": DensePayload(torch.full((20,), 3e38), (4, 5)),
                              "b": DensePayload(torch.zeros(5), (5,))})
    with pytest.raises(Diverged):
        strategy.aggregate_train(1, [reply(messages[1], overflow), reply(messages[2], overflow)])
