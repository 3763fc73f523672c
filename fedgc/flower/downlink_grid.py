"""Server half of downlink compression (``fedgc.compress.downlink``): a ``Grid`` wrapper that turns
each training message's dense global model into a compressed difference to that client's replica.

It sits under ``NetworkGrid`` (which charges the compressed message's wire size to the link) and
over the transport; the client half is ``fedgc.flower.downlink_mod``. The strategy is unchanged: it
still hands every node the global model.

A node's replica is *confirmed* when its reply to the download arrives (any reply without an error:
the client applied the download before training). A node whose reply carried an error, or that never
answered, may hold either the old or the new replica, so its next download is a **reset**: the
dense model, which the client adopts as its replica. Nodes never contacted hold the initial model,
which every client builds from the scenario's seed, so the first download is already compressed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

from fedgc.compress.downlink import DownlinkConfig, Weights, as_replica, make_download, model_digest
from fedgc.flower.codec import encode_update
from fedgc.flower.partition_grid import poll_replies
from fedgc.flower.wrapped_grid import WrappedGrid

DELTA_KEY = "model-delta"  # the compressed difference, in place of the "arrays" record
BASE_DIGEST = "downlink-base"  # digest of the replica the difference applies to
NEW_DIGEST = "downlink-digest"  # digest of the replica once the difference is applied
RESET = "downlink-reset"  # True: "arrays" is the whole model; adopt it as the replica


@dataclass
class DownlinkRound:
    """What the last round's downloads carried (read by the server's recorder)."""

    compressed: int = 0
    resets: int = 0
    elements_sent: int = 0
    elements_total: int = 0

    @property
    def density(self) -> float | None:
        return self.elements_sent / self.elements_total if self.elements_total else None


@dataclass
class _InFlight:
    node: int
    replica: Weights
    digest: str


class DownlinkGrid(WrappedGrid):
    def __init__(self, inner, config: DownlinkConfig, initial: Weights, seed: int) -> None:
        super().__init__(inner)
        self.config = config
        self.compressor = config.compressor()
        self.seed = seed
        self.initial = as_replica(initial)
        self.initial_digest = model_digest(self.initial)
        self.replicas: dict[int, tuple[Weights, str]] = {}  # confirmed (replica, digest); absent: initial
        self.unsure: set[int] = set()  # nodes whose replica is not known: their next download is a reset
        self.in_flight: dict[str, _InFlight] = {}  # message id → what the node holds once it applies it
        self.last_round = DownlinkRound()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        train = [m for m in messages if m.metadata.message_type == MessageType.TRAIN
                 and m.has_content() and "arrays" in m.content.array_records]
        if not train:
            return self.inner.push_messages(messages)
        stats = DownlinkRound()
        targets: dict[int, Weights] = {}  # the strategy sends one ArrayRecord to every node: decode it once
        outcome: list[_InFlight] = []
        for message in train:
            record = message.content.array_records["arrays"]
            if id(record) not in targets:
                targets[id(record)] = as_replica(record.to_torch_state_dict())
            outcome.append(self._encode(message, targets[id(record)], stats))
        ids = list(self.inner.push_messages(messages))
        pushed = set(ids)
        for message, flight in zip(train, outcome):
            # Every Flower grid writes the id into the message it pushes; a message it could not push
            # has no id in the returned list, and its node's replica is in doubt from now on.
            message_id = message.metadata.message_id
            if message_id and message_id in pushed:
                self.in_flight[message_id] = flight
            else:
                self.unsure.add(flight.node)
        self.last_round = stats
        return ids

    def _encode(self, message: Message, target: Weights, stats: DownlinkRound) -> _InFlight:
        node = message.metadata.dst_node_id
        config = ConfigRecord(dict(message.content.config_records["config"]))
        waiting = [i for i, f in self.in_flight.items() if f.node == node]
        if waiting:  # an earlier download's reply was not pulled (a deadline, or the first K were in)
            self.pull_messages(waiting)  # it may have arrived since: then it confirms the replica
        for message_id in waiting:  # still unanswered: the node may or may not have applied it
            if self.in_flight.pop(message_id, None) is not None:
                self.unsure.add(node)
        if node in self.unsure:
            config[RESET] = True
            message.content = RecordDict({"arrays": message.content.array_records["arrays"], "config": config})
            stats.resets += 1
            return _InFlight(node, target, model_digest(target))
        base, base_digest = self.replicas.get(node, (self.initial, self.initial_digest))
        round_seed = int(config.get("server-round", 0))
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + node * 7919 + round_seed) % 2**63)
        download = make_download(target, base, self.config, self.compressor, generator)
        digest = model_digest(download.replica)
        config[BASE_DIGEST], config[NEW_DIGEST] = base_digest, digest
        message.content = RecordDict({DELTA_KEY: encode_update(download.payloads), "config": config})
        stats.compressed += 1
        stats.elements_sent += download.elements_sent
        stats.elements_total += download.elements_total
        return _InFlight(node, download.replica, digest)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        replies = list(self.inner.pull_messages(message_ids))
        for reply in replies:
            flight = self.in_flight.pop(reply.metadata.reply_to_message_id, None)
            if flight is None:
                continue
            if reply.has_error() or reply.metadata.src_node_id != flight.node:
                self.replicas.pop(flight.node, None)
                self.unsure.add(flight.node)
            else:
                self.replicas[flight.node] = (flight.replica, flight.digest)
                self.unsure.discard(flight.node)
        return replies

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        ids = list(self.push_messages(messages))
        return poll_replies(self, ids, None if timeout is None else time.monotonic() + timeout)

    # Checkpoints ------------------------------------------------------------------------------
    def state(self) -> dict:
        # Replicas are replaced, never changed in place: the checkpoint can hold them as they are.
        return {"replicas": dict(self.replicas),
                "unsure": sorted(self.unsure | {f.node for f in self.in_flight.values()})}

    def load_state(self, state: dict) -> None:
        self.replicas = {int(n): (r, d) for n, (r, d) in state["replicas"].items()}
        self.unsure = set(state["unsure"])
        self.in_flight.clear()
