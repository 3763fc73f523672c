"""Node ids keyed by data partition, on Flower's runtimes.

On Flower's simulation and deployment runtimes the SuperLink gives each SuperNode a random 64-bit
node id; the data partition a node holds is its ``node_config["partition-id"]``, which only the node
knows. fedgc's seeded client selection, the simulated link each client gets and every per-client
metric are keyed by node id, so with random ids the same seed would select different partitions on
each engine and run (and ids of 2**63 or more, mixed with smaller ones, turn numpy arrays into
float64 and lose digits).

``PartitionGrid`` asks every node once which partition it holds (a ``query.partition`` message,
answered by ``fedgc.flower.client_app.report_partition``) and presents node ``p`` as id ``p + 1``: the ids the
inline engine gives its nodes. Selection, links and metrics are then identical on every engine for
a seed. The census messages are not training traffic and are not counted in the byte metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid

from fedgc.flower.wrapped_grid import WrappedGrid

PARTITION_QUERY = "query.partition"  # message type the ClientApp answers with its partition
POLL_INTERVAL_S = 0.05

logger = logging.getLogger(__name__)


def poll_replies(grid: Grid, message_ids: Iterable[str], deadline: float | None,
                 on_reply=None) -> list[Message]:
    """Pull replies until every message has one or ``deadline`` (``time.monotonic``) passes.

    ``on_reply(reply)`` is called as each reply arrives; returning True stops early."""
    pending = {i for i in message_ids if i}  # Flower's HTTP grid returns None for a message it could not push
    replies: list[Message] = []
    while pending:
        pulled = list(grid.pull_messages(pending))
        for reply in pulled:
            pending.discard(reply.metadata.reply_to_message_id)
            replies.append(reply)
            if on_reply is not None and on_reply(reply):
                return replies
        if not pending or (deadline is not None and time.monotonic() >= deadline):
            break
        if not pulled:
            time.sleep(POLL_INTERVAL_S)
    return replies


def ask_partitions(grid: Grid, node_ids: list[int], timeout_s: float) -> dict[int, int]:
    """{node id: partition id} for the nodes that answered the partition query in time."""
    messages = [Message(RecordDict(), dst_node_id=node, message_type=PARTITION_QUERY) for node in node_ids]
    ids = list(grid.push_messages(messages))
    answers = {}
    for reply in poll_replies(grid, ids, time.monotonic() + timeout_s):
        node = reply.metadata.src_node_id
        metrics = None if reply.has_error() else reply.content.metric_records.get("partition")
        if metrics is None or "partition-id" not in metrics:
            logger.warning("node %s did not report a partition-id; it is left out", node)
            continue
        answers[node] = int(metrics["partition-id"])
    return answers


class PartitionGrid(WrappedGrid):
    """Presents every node of ``inner`` as ``partition-id + 1``; see the module docstring."""

    def __init__(self, inner: Grid, partitions: dict[int, int]) -> None:
        super().__init__(inner)
        self.label_of: dict[int, int] = {}
        # Two nodes claiming one partition: the lower node id keeps it (deterministic).
        for node in sorted(partitions):
            label = partitions[node] + 1
            if label in self.label_of.values():
                logger.warning("node %s also claims partition %s; it is left out", node, label - 1)
                continue
            self.label_of[node] = label
        self.node_of = {label: node for node, label in self.label_of.items()}

    @classmethod
    def census(cls, inner: Grid, expected: int, wait_s: float) -> PartitionGrid:
        """Ask nodes for their partition until ``expected`` partitions are known or ``wait_s`` passes
        (SuperNodes of a deployment may still be connecting when the run starts)."""
        deadline = time.monotonic() + wait_s
        partitions: dict[int, int] = {}
        asked: set[int] = set()
        while True:
            new = sorted(set(inner.get_node_ids()) - asked)
            if new:
                asked.update(new)
                partitions.update(ask_partitions(inner, new, max(1.0, deadline - time.monotonic())))
            valid = {n: p for n, p in partitions.items() if 0 <= p < expected}
            if len(set(valid.values())) >= expected or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        for node in sorted(set(partitions) - set(valid)):
            logger.warning("node %s reports partition %s, outside 0..%s; it is left out", node,
                           partitions[node], expected - 1)
        if not valid:
            raise ValueError(f"no node reported a partition-id in 0..{expected - 1} within {wait_s:.0f} s")
        return cls(inner, valid)

    # Delegation with translated ids -----------------------------------------------------------
    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return self.inner.create_message(content, message_type, self.node_of[dst_node_id], group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        online = set(self.inner.get_node_ids())
        return sorted(label for node, label in self.label_of.items() if node in online)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        for message in messages:
            label = message.metadata.dst_node_id
            if label in self.node_of:
                message.metadata.dst_node_id = self.node_of[label]
        return self.inner.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        replies = list(self.inner.pull_messages(message_ids))
        for reply in replies:
            node = reply.metadata.src_node_id
            # Metadata has no setter for the sender: a reply's sender is fixed once it arrives.
            reply.metadata.__dict__["_src_node_id"] = self.label_of.get(node, node)
        return replies

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        ids = list(self.push_messages(messages))
        return poll_replies(self, ids, None if timeout is None else time.monotonic() + timeout)
