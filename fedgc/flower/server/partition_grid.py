"""Node ids keyed by data partition, on Flower's runtimes.

On Flower's simulation and deployment runtimes the SuperLink gives each SuperNode a random 64-bit
node id; the data partition a node holds is its ``node_config["partition-id"]``, which only the node
knows. fedgc's seeded client selection, the simulated link each client gets and every per-client
metric are keyed by node id, so with random ids the same seed would select different partitions on
each engine and run (and ids of 2**63 or more, mixed with smaller ones, turn numpy arrays into
float64 and lose digits).

``PartitionGrid`` asks every node once which partition it holds (a ``query.partition`` message,
answered by ``fedgc.flower.client.client_app.report_partition``) and presents node ``p`` as id ``p + 1``: the ids the
inline engine gives its nodes. Selection, links and metrics are then identical on every engine for
a seed. The census messages are not training traffic and are not counted in the byte metrics.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Iterable

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.run import Run

from fedgc.flower.internals import set_src_node_id
from fedgc.flower.keys import NO_REPLICA, PARTITION_QUERY, RESTORE_QUERY, STATE_QUERY
from fedgc.flower.state.client_state import records_state, state_records
from fedgc.flower.state.disk_store import DiskStore
from fedgc.flower.transport import Transport
from fedgc.flower.wire_versions import declared

STATE_TIMEOUT_S = 120.0
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


MAX_PARTITION_ID = 2**31 - 1


def partition_id(value: object) -> int | None:
    """A reported partition id as an int, or None when it is not one: an int (not a bool), or a float
    that is a whole number, in 0..2^31-1. NaN, infinities, lists and strings are not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_PARTITION_ID:
        return None
    return value


def read_partition(reply: Message, refused: Counter | None = None) -> tuple[int, bool, tuple[int, ...]] | None:
    """(partition id, holds no downlink replica, the blob versions it speaks: ``wire_versions.declared``)
    from a partition query's reply, or None (counted in ``refused`` by reason): nothing a node sends
    can raise out of the census."""
    node = reply.metadata.src_node_id
    try:
        metrics = None if reply.has_error() else reply.content.metric_records.get("partition")
        raw = metrics.get("partition-id") if metrics is not None else None
        flag = metrics.get(NO_REPLICA) if metrics is not None else None
        versions = declared(metrics)
    except Exception:  # noqa: BLE001 — a malformed reply is a refusal, whatever it is
        metrics = raw = flag = versions = None
    reason = None
    if raw is None:
        reason = "no partition-id"
    elif (partition := partition_id(raw)) is None:
        reason = "partition-id not an integer in range"
    elif flag is not None and (isinstance(flag, list) or flag not in (0, 1, 0.0, 1.0)):
        reason = "no-replica flag not 0 or 1"
    elif versions is None:
        reason = "wire-versions not a list of versions"
    if reason is not None:
        logger.warning("node %s: %s (%.40r); it is left out", node, reason, raw)
        if refused is not None:
            refused[reason] += 1
        return None
    return partition, bool(flag), versions


def partition_queries(node_ids: Iterable[int]) -> list[Message]:
    """One partition query (answered by ``client_app.report_partition``) for each node."""
    return [Message(RecordDict(), dst_node_id=node, message_type=PARTITION_QUERY) for node in node_ids]


def ask_partitions(grid: Grid, node_ids: list[int], timeout_s: float, without_replica: set[int] | None = None,
                   refused: Counter | None = None, versions: dict[int, tuple[int, ...]] | None = None,
                   ) -> tuple[dict[int, int], dict[str, int]]:
    """({node id: partition id} for the nodes that answered the partition query in time, {message id:
    node} of the queries still unanswered); the nodes that announced they hold no downlink replica
    (``no-replica``) are added to ``without_replica``, the blob versions each declared to ``versions``."""
    ids = list(grid.push_messages(partition_queries(node_ids)))
    answers = {}
    # The queries the node itself answered (a refused answer too) are not pulled again between rounds: a
    # SuperLink would answer that second pull with an error reply of its own, counted as a second refusal.
    # A SuperLink's error reply (a node offline) leaves the query open for the node to answer later.
    asked_node = dict(zip(ids, node_ids))
    replied = set()
    for reply in poll_replies(grid, ids, time.monotonic() + timeout_s):
        if reply.metadata.src_node_id == asked_node.get(reply.metadata.reply_to_message_id):
            replied.add(reply.metadata.reply_to_message_id)
        node, answer = reply.metadata.src_node_id, read_partition(reply, refused)
        if answer is None:
            continue
        answers[node] = answer[0]
        if without_replica is not None and answer[1]:
            without_replica.add(node)
        if versions is not None:
            versions[node] = answer[2]
    answered = {r for r, node in zip(ids, node_ids) if node in answers} | replied
    return answers, {i: node for i, node in zip(ids, node_ids) if i and i not in answered}


class PartitionGrid(Transport):
    """Presents every node of ``inner`` as ``partition-id + 1``; see the module docstring."""

    def __init__(self, inner: Grid, partitions: dict[int, int], without_replica: set[int] = frozenset(), *,
                 expected: int | None = None, querying: dict[str, int] | None = None) -> None:
        self.inner = inner
        self.refused: Counter[str] = Counter()  # census and admission answers refused, by reason
        # A deployment (``expected`` given): nodes that connect after the census, or answer it late,
        # are asked (``querying``: unanswered partition queries by message id) and admitted as they answer.
        self.expected = expected
        self.querying = dict(querying or {})
        self.asked = set(partitions) | set(self.querying.values())
        self.label_of: dict[int, int] = {}
        # Two nodes claiming one partition: the lower node id keeps it (deterministic).
        for node in sorted(partitions):
            label = partitions[node] + 1
            if label in self.label_of.values():
                logger.warning("node %s also claims partition %s; it is left out", node, label - 1)
                self.refused["partition claimed twice"] += 1
                continue
            self.label_of[node] = label
        self.node_of = {label: node for node, label in self.label_of.items()}
        # Nodes (by id as presented) that hold no downlink replica: their first download is a reset.
        self.without_replica = {self.label_of[n] for n in without_replica if n in self.label_of}
        # The run folder's client-state store when the nodes keep their states there (the ServerApp sets it).
        self.store: DiskStore | None = None
        # The blob versions each node declared (by id as presented), and the version the scenario's
        # traffic needs with the setting that needs it (``wire_versions.needed``): a node that joins
        # later without it is left out.
        self.wire_versions: dict[int, tuple[int, ...]] = {}
        self.wire_needed: tuple[int, str | None] = (1, None)

    @classmethod
    def census(cls, inner: Grid, expected: int, wait_s: float, *, admit_late: bool = False,
               wire: tuple[int, str | None] = (1, None)) -> PartitionGrid:
        """Ask nodes for their partition until ``expected`` partitions are known or ``wait_s`` passes
        (SuperNodes of a deployment may still be connecting when the run starts). ``admit_late``: nodes
        that answer later, or connect later, join the run as they answer (a deployment's phones).
        ``wire``: the blob version the run needs and why (``fedgc.flower.wire_versions.needed``); a node
        in the census that does not declare it is a ValueError, one line naming the node."""
        deadline = time.monotonic() + wait_s
        partitions: dict[int, int] = {}
        asked: set[int] = set()
        querying: dict[str, int] = {}
        without_replica: set[int] = set()
        versions: dict[int, tuple[int, ...]] = {}
        refused: Counter[str] = Counter()
        while True:
            new = sorted(set(inner.get_node_ids()) - asked)
            if new:
                asked.update(new)
                answers, unanswered = ask_partitions(inner, new, max(1.0, deadline - time.monotonic()),
                                                     without_replica, refused, versions)
                partitions.update(answers)
                querying.update(unanswered)
            valid = {n: p for n, p in partitions.items() if 0 <= p < expected}
            if len(set(valid.values())) >= expected or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        for node in sorted(set(partitions) - set(valid)):
            refused["partition out of range"] += 1
            logger.warning("node %s reports partition %s, outside 0..%s; it is left out", node,
                           partitions[node], expected - 1)
        if not valid:
            raise ValueError(f"no node reported a partition-id in 0..{expected - 1} within {wait_s:.0f} s")
        grid = cls(inner, valid, without_replica, expected=expected if admit_late else None,
                   querying=querying if admit_late else None)
        grid.asked |= asked
        grid.refused.update(refused)
        grid.wire_versions = {label: versions[node] for node, label in grid.label_of.items()}
        grid.wire_needed = wire
        version, why = wire
        for node, label in sorted(grid.label_of.items(), key=lambda item: item[1]):
            if version not in versions[node]:
                raise ValueError(f"node {label} (partition {label - 1}) speaks wire format version "
                                 f"{', '.join(map(str, versions[node]))} only, and {why} needs version {version}: "
                                 f"choose value_dtype fp32 or fp16, or a client that declares wire-versions [1, 3]")
        return grid

    def admit(self, online: set[int]) -> None:
        """A deployment's newcomers among the ``online`` nodes: ask every node not asked yet for its
        partition (without waiting), and admit those whose answers are in. A node takes its
        partition's label unless a connected node holds it; from a node no longer connected it takes
        it over (a phone that came back under a new node id)."""
        if self.expected is None:
            return
        new = sorted(online - self.asked)
        if new:
            self.querying.update({i: node for i, node in zip(self.inner.push_messages(partition_queries(new)), new) if i})
            self.asked.update(new)
        if not self.querying:
            return
        for reply in self.inner.pull_messages(list(self.querying)):
            node = self.querying.pop(reply.metadata.reply_to_message_id, None)
            answer = read_partition(reply, self.refused)
            if node is None or answer is None:
                continue
            partition, no_replica, versions = answer
            label = partition + 1
            if self.wire_needed[0] not in versions:
                self.refused["wire version not declared"] += 1
                logger.warning("node %s speaks wire format version %s only, and %s needs version %s; it is left out",
                               node, ", ".join(map(str, versions)), self.wire_needed[1], self.wire_needed[0])
                continue
            holder = self.node_of.get(label)
            if not 0 <= partition < self.expected or (holder is not None and holder in online):
                self.refused["partition out of range or held"] += 1
                logger.warning("node %s reports partition %s, which is outside 0..%s or held; it is left out",
                               node, partition, self.expected - 1)
                continue
            self.label_of.pop(holder, None)
            self.label_of[node], self.node_of[label] = label, node
            self.wire_versions[label] = versions
            if no_replica:
                self.without_replica.add(label)
            logger.info("node %s joins the run as node %s (partition %s)", node, label, partition)

    # Delegation with translated ids -----------------------------------------------------------
    def nodes_without_replica(self) -> set[int]:
        return set(self.without_replica)

    def set_run(self, run: Run) -> None:
        self.inner.set_run(run)

    @property
    def run(self) -> Run:
        return self.inner.run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return self.inner.create_message(content, message_type, self.node_of[dst_node_id], group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        online = set(self.inner.get_node_ids())
        self.admit(online)
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
            set_src_node_id(reply.metadata, self.label_of.get(node, node))
        return replies

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return poll_replies(self, list(self.push_messages(messages)), None if timeout is None else time.monotonic() + timeout)

    # The nodes' states (checkpoints) -------------------------------------------------------------
    def _ask_each(self, message_type: str, contents: dict[int, RecordDict]) -> dict[int, Message]:
        """One message per node (by label); the replies without an error, by label."""
        ids = list(self.push_messages([Message(content, dst_node_id=label, message_type=message_type)
                                        for label, content in contents.items()]))
        replies = poll_replies(self, ids, time.monotonic() + STATE_TIMEOUT_S)
        return {r.metadata.src_node_id: r for r in replies if not r.has_error()}

    def state_dict(self) -> dict:
        """Every connected node's ``Context.state`` (those that hold any), asked from the nodes; with a
        client-state store on disk (``store``: Flower's simulation runtime, ``client_state.store: disk``)
        the store's checkpoint mark instead: the states are in the run folder's store already."""
        if self.store is not None:
            return self.store.state_dict()
        labels = self.get_node_ids()
        replies = self._ask_each(STATE_QUERY, {label: RecordDict() for label in labels})
        missing = sorted(set(labels) - set(replies))
        if missing:
            raise RuntimeError(f"node {missing[0]} did not report its state for the checkpoint")
        return {"contexts": {label: records_state(replies[label].content) for label in labels
                             if len(replies[label].content)}}

    def load_state_dict(self, state: dict) -> None:
        """Hand each node the state it had at the checkpoint (nodes with none start empty); with a store
        on disk, take the store back to the checkpoint's mark (or into it, the states a checkpoint holds)."""
        saved = state.get("contexts", {}) if self.store is not None else state["contexts"]
        unknown = set(saved) - set(self.label_of.values())
        if unknown:
            raise ValueError(f"it holds state for node {min(unknown)}, which this scenario does not have")
        if self.store is not None:
            self.store.load_state_dict(state)
            return
        labels = self.get_node_ids()
        contents = {label: state_records(saved[label]) if label in saved else RecordDict() for label in labels}
        missing = sorted(set(labels) - set(self._ask_each(RESTORE_QUERY, contents)))
        if missing:
            raise ValueError(f"node {missing[0]} did not take its state back")
