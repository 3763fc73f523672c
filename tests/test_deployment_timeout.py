"""A real deployment's round does not wait an hour for a node that never replies: without
``network.deadline_s`` it waits ``DEPLOYMENT_REPLY_TIMEOUT_S`` (600 s), and the silent node is late."""

from __future__ import annotations

import time

from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server import exchange
from fedgc.flower.server.exchange import MeasuredExchange
from fedgc.flower.server.partition_grid import partition_queries
from fedgc.scenario.model import validate


class DroppingLink(InlineGrid):
    """The inline engine's nodes, behind a SuperLink that loses every reply of node 2."""

    def pull_messages(self, message_ids):
        return [r for r in super().pull_messages(message_ids) if r.metadata.src_node_id != 2]


def test_the_default_reply_timeout_of_a_deployment_is_ten_minutes_and_deadline_s_overrides_it():
    assert exchange.DEPLOYMENT_REPLY_TIMEOUT_S == 600.0
    assert MeasuredExchange().reply_timeout_s == 600.0
    assert MeasuredExchange(deadline_s=7200.0).reply_timeout_s == 7200.0  # longer, when asked for


def test_a_silent_node_holds_the_round_only_until_the_reply_timeout(tiny_scenario, monkeypatch):
    monkeypatch.setattr(exchange, "DEPLOYMENT_REPLY_TIMEOUT_S", 1.5)
    grid = DroppingLink.for_scenario(validate(tiny_scenario))
    started = time.monotonic()
    result = MeasuredExchange().run(grid, partition_queries([1, 2, 3]))
    took = time.monotonic() - started
    assert 1.4 < took < 10
    statuses = {t.node_id: t.status for t in result.traffic.timeline.timings}
    assert statuses == {1: "completed", 2: "late", 3: "completed"}
