"""The simulated network, placed between the strategy and the transport as a ``Grid`` wrapper.

Why a Grid wrapper (and not a strategy wrapper): every message the strategy sends, and every reply,
crosses the grid, so this is the one place that sees real serialized sizes for both directions, and
it works unchanged around any transport (the inline engine, Flower's simulation runtime). The
strategy stays a plain Flower strategy: it sees only online nodes (``get_node_ids``) and only the
replies that arrived in time.

Two modes, chosen from the transport underneath:
- **simulated** when every node is virtual (the inline engine, Flower's simulation runtime): each
  round is replayed on the simulated network model with the messages' real wire sizes;
- **measured** on a real deployment (SuperNodes on devices): there is no simulated network; bytes are
  the wire sizes of the messages actually exchanged and times come from the wall clock (seconds since
  the run started, written to the same metrics keys).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from flwr.app import Message, MessageType
from flwr.serverapp import Grid

from fedgc.flower.inline_grid import InlineGrid
from fedgc.flower.partition_grid import poll_replies
from fedgc.flower.wire import message_wire_size
from fedgc.flower.wrapped_grid import WrappedGrid
from fedgc.network.timeline import ClientJob, ClientTiming, NetworkModel, RoundTimeline


def has_virtual_nodes(grid: Grid) -> bool:
    """True when the nodes behind ``grid`` (through any wrappers) are simulated in this machine."""
    from flwr.superlink.grid.inmemory_grid import InMemoryGrid  # Flower's simulation runtime

    while hasattr(grid, "inner"):
        grid = grid.inner
    return isinstance(grid, (InlineGrid, InMemoryGrid))


@dataclass
class TrainRoundTraffic:
    """What the network did with one round of training messages (read by the server's recorder)."""

    timeline: RoundTimeline
    selected: int = 0
    failed: int = 0
    bytes_down: int = 0
    bytes_up: int = 0
    upload_bytes: dict[int, int] = field(default_factory=dict)


class NetworkGrid(WrappedGrid):
    def __init__(self, inner: Grid, network: NetworkModel, *, deadline_s: float | None = None,
                 keep_first: int | None = None) -> None:
        super().__init__(inner)
        self.network = network
        self.deadline_s = deadline_s
        self.keep_first = keep_first
        self.last_round: TrainRoundTraffic | None = None
        self.measured = not has_virtual_nodes(inner)
        self.origin = time.time()  # measured mode: times are seconds since the run started

    # The network ------------------------------------------------------------------------------
    def get_node_ids(self) -> Iterable[int]:
        """Only the nodes that are online now, on the simulated clock (measured: every connected node)."""
        if self.measured:
            return sorted(self.inner.get_node_ids())
        nodes = sorted(self.inner.get_node_ids())
        online = self.network.online_nodes(nodes)
        if not online:  # everybody is offline: the round starts when the first client comes back
            self.network.wait_for_online(nodes)
            online = self.network.online_nodes(nodes)
        return online

    def _bytes(self, table: str, message_id: str, message: Message) -> int:
        known = getattr(self.inner, table, None)
        if known is not None and message_id in known:
            return known[message_id]
        return message_wire_size(message)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        messages = list(messages)
        if not messages or any(m.metadata.message_type != MessageType.TRAIN for m in messages):
            return self.inner.send_and_receive(messages, timeout=timeout)
        pushed_at = time.time()
        ids = list(self.inner.push_messages(messages))
        # Sizes of the messages as pushed (the transport has filled in its ids), by message id.
        down = {i: self._bytes("sent_bytes", i, m) for i, m in zip(ids, messages) if i}
        if self.measured:
            return self._measured_round(messages, ids, down, pushed_at, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        replies = poll_replies(self.inner, ids, deadline)
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
            jobs.append(ClientJob(node_id=node, down_bytes=down[reply.metadata.reply_to_message_id],
                                  compute_samples=samples, up_bytes=size))
            by_node[node] = reply
            upload_bytes[node] = size
        # Replies come back in arrival order on Flower's runtimes: the network model sees node order.
        jobs.sort(key=lambda job: job.node_id)
        timeline = self.network.run_round(jobs, deadline_s=self.deadline_s, keep_first=self.keep_first)
        return self._record(messages, failed, sum(down.values()), timeline, by_node, upload_bytes)

    def _record(self, messages, failed, bytes_down, timeline, by_node, upload_bytes) -> list[Message]:
        completed = [t.node_id for t in timeline.timings if t.status == "completed"]
        self.last_round = TrainRoundTraffic(
            timeline=timeline,
            selected=len(messages),
            failed=failed,
            bytes_down=bytes_down,
            bytes_up=sum(upload_bytes[n] for n in completed),
            upload_bytes={n: upload_bytes[n] for n in completed},
        )
        return [by_node[n] for n in completed]

    # Measured traffic (real SuperNodes) -------------------------------------------------------
    def _measured_round(self, messages, ids, down, pushed_at, timeout) -> list[Message]:
        """A round on the wall clock: replies in arrival order, the first ``keep_first`` kept, those
        after ``deadline_s`` (real seconds) late. Compute ends when the client created its reply
        (its own clock), upload when the reply reached this server (resolution: the poll interval);
        the download cannot be told apart from the server's side and counts as compute."""
        limits = [s for s in (timeout, self.deadline_s) if s is not None]
        deadline = time.monotonic() + min(limits) if limits else None
        arrived: dict[str, float] = {}
        kept = 0

        def on_reply(reply: Message) -> bool:
            nonlocal kept
            arrived[reply.metadata.reply_to_message_id] = time.time()
            kept += not reply.has_error()
            return self.keep_first is not None and kept >= self.keep_first

        replies = poll_replies(self.inner, ids, deadline, on_reply)
        closed_at = time.time()
        origin = self.origin
        timings, by_node, upload_bytes, failed = [], {}, {}, 0
        answered = set()
        for reply in replies:
            message_id = reply.metadata.reply_to_message_id
            answered.add(message_id)
            if reply.has_error():
                failed += 1
                continue
            node = reply.metadata.src_node_id
            uploaded = arrived[message_id]
            computed = min(max(reply.metadata.created_at, pushed_at), uploaded)
            timings.append(ClientTiming(node_id=node, start=pushed_at - origin, downloaded=pushed_at - origin,
                                        computed=computed - origin, uploaded=uploaded - origin, status="completed"))
            by_node[node] = reply
            upload_bytes[node] = self._bytes("reply_bytes", message_id, reply)
        for message_id, message in zip(ids, messages):
            if message_id not in answered:
                timings.append(ClientTiming(node_id=message.metadata.dst_node_id, start=pushed_at - origin,
                                            status="late"))
        timeline = RoundTimeline(start=pushed_at - origin, end=closed_at - origin, timings=timings)
        return self._record(messages, failed, sum(down.values()), timeline, by_node, upload_bytes)
