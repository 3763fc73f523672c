"""The exchange stage of a round: push the training messages through the transport, collect the
replies, and decide which arrived in time, with what traffic and timing.

Two classes, chosen by the engine (``fedgc.flower.server.loop``):
- ``SimulatedExchange`` when every node is virtual (the inline engine, Flower's simulation runtime):
  the round is replayed on the simulated network model with the messages' real wire sizes, and only
  the nodes online on the simulated clock are offered for selection;
- ``MeasuredExchange`` on a real deployment (SuperNodes on devices): there is no simulated network;
  bytes are the wire sizes of the messages actually exchanged and times come from the wall clock
  (seconds since the run started, written to the same metrics keys).
Both return every reply they pulled (the downlink stage confirms replicas from all of them) and,
apart, the replies that count for aggregation.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from flwr.app import Message

from fedgc.core.records import ClientFailure, TrainRoundTraffic
from fedgc.flower import keys
from fedgc.flower.message_size import message_wire_size
from fedgc.flower.server.partition_grid import poll_replies
from fedgc.flower.transport import Transport
from fedgc.network.timeline import ClientJob, ClientTiming, NetworkModel, RoundTimeline

# How long a round waits for replies at most (real seconds; Flower's own default for a round).
REPLY_TIMEOUT_S = 3600.0
# A real deployment's round waits this long for replies unless network.deadline_s says otherwise: one
# silent node (or a reply the SuperLink dropped) holds a round for this long, not for an hour.
DEPLOYMENT_REPLY_TIMEOUT_S = 600.0


_FLOWER_REASON = re.compile(r"^<class '(?:[\w.]*\.)?(\w+)'>:<'(.*)'>$", re.DOTALL)
_RAISED = re.compile(r"^(\w+(?:Error|Exception|Interrupt|Exit)\w*): (.+)$", re.MULTILINE)


def describe_failure(node_id: int, reason: str) -> ClientFailure:
    """Exception type and one-line message from an error reply's reason. Two forms: the inline
    engine's ``"Type: message\ntraceback"``, and Flower's runtimes' ``"<class 'm.Type'>:<'message'>"``
    (where a ClientApp's own exception may be wrapped: the innermost ``Type: message`` line wins)."""
    text = (reason or "").strip()
    match = _FLOWER_REASON.match(text)
    if match:
        error_type, text = match.group(1), match.group(2).strip()
        inner = _RAISED.findall(text)
        if inner:
            error_type, text = inner[-1]
    else:
        first = text.splitlines()[0] if text else ""
        error_type, _, text = first.partition(": ") if ": " in first else ("Error", "", first)
    message = " ".join(text.split())
    return ClientFailure(node_id, error_type or "Error", message[:500] or "(no message)")


def _claimed_samples(metrics, max_samples: int | None) -> int:
    """The samples a reply says it trained on, for its simulated compute time, never more than the
    server asked for (``max_samples``): the clock is charged only what the server can vouch for. The
    strategy validates the claim later (and rejects a larger one as ``bad-metrics``); here anything not a
    finite number >= 0 counts as 0, so a malformed value can never crash the round."""
    try:
        value = metrics.get(keys.SAMPLES, 0) if metrics else 0
    except Exception:  # noqa: BLE001 — a malformed record charges nothing
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return 0
    return int(value) if max_samples is None else int(min(value, max_samples))


@dataclass
class Exchanged:
    """One exchange: ``pulled`` every reply received (errors included), ``replies`` those that count
    (completed in time, node order), ``ids`` the transport's message ids (None: not pushed)."""

    ids: list[str | None]
    pulled: list[Message]
    replies: list[Message]
    traffic: TrainRoundTraffic


def _wire_bytes(measured: int | None, message: Message) -> int:
    """The transport's own count when it keeps one (the inline grid measures what it serialized),
    else the size Flower's serialization gives the message."""
    return measured if measured is not None else message_wire_size(message)


def _traffic(messages, nodes, ids, down, failed, timeline, by_node, upload_bytes) -> tuple[list[Message], TrainRoundTraffic]:
    completed = [t.node_id for t in timeline.timings if t.status == "completed"]
    traffic = TrainRoundTraffic(
        timeline=timeline,
        selected=len(messages),
        failed=len(failed),
        failures=sorted(failed, key=lambda f: f.node_id),
        bytes_down=sum(down.values()),
        bytes_up=sum(upload_bytes[n] for n in completed),
        upload_bytes={n: upload_bytes[n] for n in completed},
        download_bytes={node: down[i] for i, node in zip(ids, nodes) if i in down},
    )
    return [by_node[n] for n in completed], traffic


class SimulatedExchange:
    """The round replayed on the simulated network model (links, devices, availability, clock)."""

    def __init__(self, network: NetworkModel, *, deadline_s: float | None = None,
                 keep_first: int | None = None, max_samples: int | None = None) -> None:
        self.network = network
        self.max_samples = max_samples
        self.deadline_s = deadline_s
        self.keep_first = keep_first

    def online(self, nodes: list[int]) -> list[int]:
        """The nodes online now on the simulated clock; when none is, the clock advances to the
        first that comes back (as a server waits for clients to check in)."""
        online = self.network.online_nodes(nodes)
        if not online:
            self.network.wait_for_online(nodes)
            online = self.network.online_nodes(nodes)
        return online

    def run(self, transport: Transport, messages: list[Message]) -> Exchanged:
        nodes = [m.metadata.dst_node_id for m in messages]  # before the transport relabels them
        ids = list(transport.push_messages(messages))
        # Sizes of the messages as pushed (the transport has filled in its ids), by message id.
        down = {i: _wire_bytes(transport.sent_size(i), m) for i, m in zip(ids, messages) if i}
        pulled = poll_replies(transport, ids, time.monotonic() + REPLY_TIMEOUT_S)
        by_node: dict[int, Message] = {}
        jobs, failed = [], []
        upload_bytes: dict[int, int] = {}
        for reply in pulled:
            node = reply.metadata.src_node_id
            if reply.has_error():
                failed.append(describe_failure(node, reply.error.reason))
                continue
            size = _wire_bytes(transport.reply_size(reply.metadata.reply_to_message_id), reply)
            jobs.append(ClientJob(node_id=node, down_bytes=down[reply.metadata.reply_to_message_id],
                                  compute_samples=_claimed_samples(reply.content.metric_records.get(keys.METRICS),
                                                                   self.max_samples),
                                  up_bytes=size))
            by_node[node] = reply
            upload_bytes[node] = size
        # Replies come back in arrival order on Flower's runtimes: the network model sees node order.
        jobs.sort(key=lambda job: job.node_id)
        timeline = self.network.run_round(jobs, deadline_s=self.deadline_s, keep_first=self.keep_first)
        replies, traffic = _traffic(messages, nodes, ids, down, failed, timeline, by_node, upload_bytes)
        return Exchanged(ids, pulled, replies, traffic)


class MeasuredExchange:
    """A round on the wall clock of a real deployment: replies in arrival order, the first
    ``keep_first`` kept, those after ``deadline_s`` (real seconds) late. Compute ends when the client
    created its reply (its own clock), upload when the reply reached this server (resolution: the
    poll interval); replies still missing are ``discarded`` when the first ``keep_first`` were in,
    otherwise ``late``; the download cannot be told apart from the server's side and counts as compute."""

    def __init__(self, *, deadline_s: float | None = None, keep_first: int | None = None) -> None:
        self.deadline_s = deadline_s
        self.keep_first = keep_first
        self.origin = time.time()  # times are seconds since the run started

    @property
    def reply_timeout_s(self) -> float:
        """How long a round waits for replies: ``deadline_s`` when set (longer or shorter than the
        default), else ``DEPLOYMENT_REPLY_TIMEOUT_S``."""
        return self.deadline_s if self.deadline_s is not None else DEPLOYMENT_REPLY_TIMEOUT_S

    def online(self, nodes: list[int]) -> list[int]:
        return nodes  # every connected node

    def run(self, transport: Transport, messages: list[Message]) -> Exchanged:
        pushed_at = time.time()
        nodes = [m.metadata.dst_node_id for m in messages]  # before the transport relabels them
        ids = list(transport.push_messages(messages))
        down = {i: _wire_bytes(transport.sent_size(i), m) for i, m in zip(ids, messages) if i}
        deadline = time.monotonic() + self.reply_timeout_s
        arrived: dict[str, float] = {}
        kept = 0

        def on_reply(reply: Message) -> bool:
            nonlocal kept
            arrived[reply.metadata.reply_to_message_id] = time.time()
            kept += not reply.has_error()
            return self.keep_first is not None and kept >= self.keep_first

        pulled = poll_replies(transport, ids, deadline, on_reply)
        closed_at = time.time()
        origin = self.origin
        timings, by_node, upload_bytes, failed = [], {}, {}, []
        answered = set()
        for reply in pulled:
            message_id = reply.metadata.reply_to_message_id
            answered.add(message_id)
            if reply.has_error():
                failed.append(describe_failure(reply.metadata.src_node_id, reply.error.reason))
                continue
            node = reply.metadata.src_node_id
            uploaded = arrived[message_id]
            computed = min(max(reply.metadata.created_at, pushed_at), uploaded)
            timings.append(ClientTiming(node_id=node, start=pushed_at - origin, downloaded=pushed_at - origin,
                                        computed=computed - origin, uploaded=uploaded - origin, status="completed"))
            by_node[node] = reply
            upload_bytes[node] = _wire_bytes(transport.reply_size(message_id), reply)
        unanswered = "discarded" if self.keep_first is not None and kept >= self.keep_first else "late"
        for message_id, message in zip(ids, messages):
            if message_id not in answered:
                timings.append(ClientTiming(node_id=message.metadata.dst_node_id, start=pushed_at - origin,
                                            status=unanswered))
        timeline = RoundTimeline(start=pushed_at - origin, end=closed_at - origin, timings=timings)
        replies, traffic = _traffic(messages, nodes, ids, down, failed, timeline, by_node, upload_bytes)
        return Exchanged(ids, pulled, replies, traffic)
