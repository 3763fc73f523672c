"""Never a blob a node cannot read: a node declares the update-blob versions it speaks in its census
answer (``wire-versions``; none declared: version 1 only, as the JVM client today), and a scenario
whose traffic needs wire format v3 (value_dtype int8, int4 or sign, up or down) is refused at the
census, in one line naming the node, when a node does not declare 3; a late joiner without it is
left out and counted."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from flwr.app import Message, MetricRecord, RecordDict

from fedgc.flower.keys import WIRE_VERSIONS
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.partition_grid import PartitionGrid, read_partition
from fedgc.flower.wire_versions import SPOKEN, declare, declared, needed
from fedgc.scenario.model import validate

V3 = (3, "compression.value_dtype: int8")


class SpeaksV1Only(InlineGrid):
    """The inline engine's nodes, ``nodes`` of which answer the census as a version-1-only client
    does (the JVM client today): no ``wire-versions``."""

    nodes: tuple[int, ...] = (2,)

    def pull_messages(self, message_ids):
        replies = list(super().pull_messages(message_ids))
        for reply in replies:
            partition = None if reply.has_error() else reply.content.metric_records.get("partition")
            if reply.metadata.src_node_id in self.nodes and partition is not None:
                reply.content.metric_records["partition"] = MetricRecord(
                    {k: v for k, v in partition.items() if k != WIRE_VERSIONS})
        return replies


def v3_scenario(tiny: dict, section: str = "compression") -> dict:
    return {**tiny, section: {"name": "topk", "density": 0.05, "value_dtype": "int8"}}


def test_the_python_client_declares_versions_1_and_3():
    assert declare(MetricRecord({"partition-id": 0}))[WIRE_VERSIONS] == [1, 3] and SPOKEN == (1, 3)


def test_a_census_answer_without_wire_versions_speaks_version_1_only():
    assert declared(MetricRecord({"partition-id": 0})) == (1,)
    assert declared(MetricRecord({"partition-id": 0, WIRE_VERSIONS: [3, 1, 3]})) == (1, 3)


@pytest.mark.parametrize("value", [[], [0], [256], [1.5], [math.nan], [math.inf], list(range(1, 18)), 3, 3.0])
def test_a_hostile_wire_versions_answer_is_refused_and_counted(tiny_scenario, value):
    InlineGrid.for_scenario(validate(tiny_scenario))  # sets Flower's task identity, which a Message needs
    message = Message(RecordDict({"partition": MetricRecord({"partition-id": 1, WIRE_VERSIONS: value})}),
                      dst_node_id=1, message_type="query.partition")
    refused = Counter()
    assert read_partition(message, refused) is None and refused == {"wire-versions not a list of versions": 1}


def test_which_scenarios_need_v3(tiny_scenario):
    assert needed(validate(tiny_scenario)) == (1, None)
    assert needed(validate(v3_scenario(tiny_scenario))) == V3
    assert needed(validate(v3_scenario(tiny_scenario, "downlink"))) == (3, "downlink.value_dtype: int8")
    off = {**tiny_scenario, "downlink": {"name": "none", "value_dtype": "int8"}}  # no downloads compressed
    with pytest.raises(ValueError):  # none sends no sparse values: int8 is refused there
        needed(validate(off))


def test_a_v3_scenario_is_refused_at_the_census_in_one_line_when_a_node_speaks_version_1_only(tiny_scenario):
    grid = SpeaksV1Only.for_scenario(validate(v3_scenario(tiny_scenario)))
    with pytest.raises(ValueError) as err:
        PartitionGrid.census(grid, expected=4, wait_s=1, wire=V3)
    message = str(err.value)
    assert "node 2 (partition 1)" in message and "compression.value_dtype: int8" in message and "\n" not in message


def test_a_version_1_node_takes_part_in_a_run_that_needs_version_1(tiny_scenario):
    grid = SpeaksV1Only.for_scenario(validate(tiny_scenario))
    grid.nodes = (1, 2, 3, 4)
    partitioned = PartitionGrid.census(grid, expected=4, wait_s=1, wire=needed(validate(tiny_scenario)))
    assert sorted(partitioned.label_of.values()) == [1, 2, 3, 4] and not partitioned.refused
    assert set(partitioned.wire_versions.values()) == {(1,)}


def test_python_nodes_pass_a_v3_census(tiny_scenario):
    """fedgc's ClientApp declares versions 1 and 3 in its census answer (``report_partition`` adds
    ``wire_versions.declare``), so a v3 scenario runs on Flower's runtimes with Python nodes."""
    scenario = validate(v3_scenario(tiny_scenario, "downlink"))
    partitioned = PartitionGrid.census(InlineGrid.for_scenario(scenario), expected=4, wait_s=1, wire=needed(scenario))
    assert sorted(partitioned.label_of.values()) == [1, 2, 3, 4]
    assert set(partitioned.wire_versions.values()) == {(1, 3)}


def test_a_late_joiner_that_speaks_version_1_only_is_left_out_of_a_v3_run_and_counted(tiny_scenario):
    grid = SpeaksV1Only.for_scenario(validate(v3_scenario(tiny_scenario)))
    grid.nodes = (2,)
    partitioned = PartitionGrid(grid, {1: 0, 3: 2, 4: 3}, expected=4)
    partitioned.wire_needed = V3
    partitioned.admit({1, 2, 3, 4})
    assert partitioned.label_of == {1: 1, 3: 3, 4: 4}
    assert partitioned.refused == {"wire version not declared": 1}
