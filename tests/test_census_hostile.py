"""A node's census answer is input: whatever it reports as its partition (NaN, ±inf, a list, a huge
number, a string, a duplicate claim), the census and late admission count it as refused, with a
reason, and go on with the honest nodes; nothing a node sends raises out of them."""

from __future__ import annotations

import math

import pytest
from flwr.app import Message, MetricRecord, RecordDict

from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.partition_grid import PartitionGrid, partition_id, read_partition
from fedgc.scenario.model import validate

HOSTILE = [math.nan, math.inf, -math.inf, [1, 2], 2.5, -1, 2**40, 1e300, True]


@pytest.mark.parametrize("value", [*HOSTILE, "3", None, b"x"])
def test_partition_id_accepts_only_whole_numbers_in_range(value):
    assert partition_id(value) is None


def test_partition_id_takes_whole_floats_and_ints():
    assert partition_id(3) == 3 and partition_id(3.0) == 3 and partition_id(0) == 0


class HostileNode(InlineGrid):
    """The inline engine's nodes, one of which (``node``) answers the partition query with ``value``."""

    node, value = 2, math.nan

    def pull_messages(self, message_ids):
        replies = list(super().pull_messages(message_ids))
        for reply in replies:
            partition = None if reply.has_error() else reply.content.metric_records.get("partition")
            if reply.metadata.src_node_id == self.node and partition is not None:
                reply.content.metric_records["partition"] = MetricRecord({"partition-id": self.value})
        return replies


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, [1.0, 2.0], 2.5, -1, 2**40, 1e300])
def test_a_hostile_census_answer_is_refused_and_counted_and_the_run_keeps_the_honest_nodes(tiny_scenario, value):
    grid = HostileNode.for_scenario(validate(tiny_scenario))
    grid.value = value
    partitioned = PartitionGrid.census(grid, expected=4, wait_s=1)
    assert sorted(partitioned.label_of) == [1, 3, 4]
    assert sum(partitioned.refused.values()) == 1, partitioned.refused


def test_a_duplicate_claim_is_counted(tiny_scenario):
    grid = HostileNode.for_scenario(validate(tiny_scenario))
    grid.value = 0  # node 2 claims node 1's partition: the lower node id keeps it
    partitioned = PartitionGrid.census(grid, expected=4, wait_s=1)
    assert partitioned.label_of == {1: 1, 3: 3, 4: 4}
    assert partitioned.refused == {"partition claimed twice": 1}


def test_read_partition_of_a_reply_without_metrics_or_with_an_odd_flag_is_none():
    message = Message(RecordDict({"partition": MetricRecord({"partition-id": 1, "no-replica": 7})}),
                      dst_node_id=1, message_type="query.partition")
    from collections import Counter

    refused = Counter()
    assert read_partition(message, refused) is None and refused == {"no-replica flag not 0 or 1": 1}
    empty = Message(RecordDict(), dst_node_id=1, message_type="query.partition")
    assert read_partition(empty, refused) is None and refused["no partition-id"] == 1


@pytest.mark.parametrize("value", [math.nan, math.inf, [1.0, 2.0], 2**40, 0])
def test_a_late_joiner_s_hostile_answer_is_refused_and_counted_and_the_run_keeps_its_nodes(tiny_scenario, value):
    """Admission between rounds: a node that connects after the census (node 2 here) and answers NaN,
    inf, a list, a huge number or a partition another connected node holds is left out and counted;
    the nodes already in keep their partitions and nothing raises."""
    grid = HostileNode.for_scenario(validate(tiny_scenario))
    grid.value = value
    partitioned = PartitionGrid(grid, {1: 0, 3: 2, 4: 3}, expected=4)
    partitioned.admit({1, 2, 3, 4})
    assert partitioned.label_of == {1: 1, 3: 3, 4: 4}
    assert sum(partitioned.refused.values()) == 1, partitioned.refused
    partitioned.admit({1, 2, 3, 4})  # asked once: not asked (nor counted) again
    assert sum(partitioned.refused.values()) == 1 and partitioned.label_of == {1: 1, 3: 3, 4: 4}


def test_a_refused_census_answer_is_not_pulled_again_between_rounds(tiny_scenario):
    """A deployment's census (late admission on) keeps the queries still unanswered for later; a query
    that was answered, even with a refused answer, is not among them: pulled again from a real
    SuperLink it would come back as Flower's error reply (from node 1, the SuperLink), counted twice."""
    grid = HostileNode.for_scenario(validate(tiny_scenario))
    partitioned = PartitionGrid.census(grid, expected=4, wait_s=1, admit_late=True)
    assert partitioned.querying == {} and sum(partitioned.refused.values()) == 1, partitioned.refused
    partitioned.admit({1, 2, 3, 4})
    assert sum(partitioned.refused.values()) == 1 and sorted(partitioned.label_of) == [1, 3, 4]
