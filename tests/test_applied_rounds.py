"""``applied-rounds``: the server tells each node which of its updates it applied, and keeps telling
it until the node answers a message that carried the list — a message that never reaches the node
(it went offline after being selected) must not lose it, or the node would put an applied update
back into its memory and it would count twice."""

from __future__ import annotations

import numpy as np
import pytest

from fedgc.core.parts import SelectionPolicy, build_model_for, federated_data, server_optimizer
from fedgc.flower import keys
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.loop import _as_record, build_strategy
from fedgc.scenario.model import validate


@pytest.mark.slow
def test_a_lost_message_keeps_its_applied_rounds_until_one_is_answered(tiny_scenario):
    scenario = validate(tiny_scenario)  # 4 nodes, every node selected every round
    data = federated_data(scenario)
    grid = InlineGrid.for_scenario(scenario)
    weights = {k: v.detach().clone() for k, v in build_model_for(scenario, data).state_dict().items()}
    strategy = build_strategy(scenario, data, {k: tuple(v.shape) for k, v in weights.items()}, SelectionPolicy(1.0),
                              4, server_optimizer(scenario), np.random.default_rng(0))

    def play(server_round: int, lost: set[int] = frozenset()) -> dict[int, list[int]]:
        messages = strategy.configure(server_round, _as_record(weights), [1, 2, 3, 4])
        told = {m.metadata.dst_node_id: list(m.content.config_records[keys.CONFIG][keys.APPLIED_ROUNDS])
                for m in messages}
        pushed = [m for m in messages if m.metadata.dst_node_id not in lost]
        ids = list(grid.push_messages(pushed))
        strategy.pushed({m.metadata.dst_node_id: i for m, i in zip(pushed, ids)})
        replies = grid.pull_messages(ids)
        strategy.acknowledge(replies)
        assert sorted(strategy.aggregate(server_round, replies).stats.applied_nodes) == sorted({1, 2, 3, 4} - lost)
        return told

    assert play(1) == {1: [], 2: [], 3: [], 4: []}
    assert play(2, lost={2}) == {1: [1], 2: [1], 3: [1], 4: [1]}  # node 2 never gets its message
    assert play(3) == {1: [2], 2: [1], 3: [2], 4: [2]}  # so it is told of round 1 again
    assert play(4) == {1: [3], 2: [3], 3: [3], 4: [3]}  # and, having answered, not a third time
