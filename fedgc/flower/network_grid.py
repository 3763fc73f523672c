"""The simulated network, placed between the strategy and the transport as a ``Grid`` wrapper.

Why a Grid wrapper (and not a strategy wrapper): every message the strategy sends, and every reply,
crosses the grid, so this is the one place that sees real serialized sizes for both directions, and
it works unchanged around any transport (the inline engine, Flower's simulation runtime). The
strategy stays a plain Flower strategy: it sees only online nodes (``get_node_ids``) and only the
replies that arrived in time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from flwr.app import Message, MessageType
from flwr.serverapp import Grid
from flwr.supercore.run import Run

from fedgc.flower.wire import message_wire_size
from fedgc.network.timeline import ClientJob, NetworkModel, RoundTimeline


@dataclass
class TrainRoundTraffic:
    """What the network did with one round of training messages (read by the server's recorder)."""

    timeline: RoundTimeline
    selected: int = 0
    failed: int = 0
    bytes_down: int = 0
    bytes_up: int = 0
    upload_bytes: dict[int, int] = field(default_factory=dict)


class NetworkGrid(Grid):
    def __init__(self, inner: Grid, network: NetworkModel, *, deadline_s: float | None = None,
                 keep_first: int | None = None) -> None:
        self.inner = inner
        self.network = network
        self.deadline_s = deadline_s
        self.keep_first = keep_first
        self.last_round: TrainRoundTraffic | None = None

    # Plain delegation -------------------------------------------------------------------------
    def set_run(self, run: Run) -> None:
        self.inner.set_run(run)

    @property
    def run(self) -> Run:
        return self.inner.run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return self.inner.create_message(content, message_type, dst_node_id, group_id, ttl)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self.inner.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self.inner.pull_messages(message_ids)

    # The network ------------------------------------------------------------------------------
    def get_node_ids(self) -> Iterable[int]:
        """Only the nodes that are online now, on the simulated clock."""
        return self.network.online_nodes(sorted(self.inner.get_node_ids()))

    def _bytes(self, table: str, message_id: str, message: Message) -> int:
        known = getattr(self.inner, table, None)
        if known is not None and message_id in known:
            return known[message_id]
        return message_wire_size(message)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        messages = list(messages)
        if not messages or any(m.metadata.message_type != MessageType.TRAIN for m in messages):
            return self.inner.send_and_receive(messages, timeout=timeout)
        ids = list(self.inner.push_messages(messages))
        down = {m.metadata.dst_node_id: self._bytes("sent_bytes", i, m) for i, m in zip(ids, messages)}
        replies = list(self.inner.pull_messages(ids))
        by_node: dict[int, Message] = {}
        jobs, failed = [], 0
        upload_bytes: dict[int, int] = {}
        for reply in replies:
            node = reply.metadata.src_node_id
            if reply.has_error():
                failed += 1
                continue
            size = self._bytes("reply_bytes", reply.metadata.reply_to_message_id, reply)
            metrics = reply.content.metric_records.get("metrics")
            samples = int(metrics.get("samples", 0)) if metrics else 0
            jobs.append(ClientJob(node_id=node, down_bytes=down[node], compute_samples=samples, up_bytes=size))
            by_node[node] = reply
            upload_bytes[node] = size
        timeline = self.network.run_round(jobs, deadline_s=self.deadline_s, keep_first=self.keep_first)
        kept = [by_node[t.node_id] for t in timeline.timings if t.status == "completed"]
        self.last_round = TrainRoundTraffic(
            timeline=timeline,
            selected=len(messages),
            failed=failed,
            bytes_down=sum(down.values()),
            bytes_up=sum(upload_bytes[t.node_id] for t in timeline.timings if t.status == "completed"),
            upload_bytes={t.node_id: upload_bytes[t.node_id] for t in timeline.timings if t.status == "completed"},
        )
        return kept
