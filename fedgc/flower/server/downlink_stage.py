"""Server half of downlink compression (``fedgc.compress.downlink``): a stage of the round loop that
turns each training message's dense global model into a compressed difference to that client's
replica, before the exchange (which charges the compressed message's wire size to the link), and
confirms the replicas from the replies after it. The client half is ``fedgc.flower.client.downlink_mod``.
The strategy is unchanged: it still hands every node the global model.

A node's replica is *confirmed* when its reply to the download arrives (any reply without an error:
the client applied the download before training). A node whose reply carried an error, or that never
answered, may hold either the old or the new replica, so its next download is a **reset**: the
dense model, which the client adopts as its replica. Nodes never contacted hold the initial model,
which every client builds from the scenario's seed, so the first download is already compressed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from flwr.app import ConfigRecord, Message, RecordDict

from fedgc.compress.downlink import DownlinkConfig, Weights, as_replica, make_download, model_digest
from fedgc.core.parts import client_seed
from fedgc.flower import keys
from fedgc.flower.keys import BASE_DIGEST, DELTA_KEY, NEW_DIGEST, RESET
from fedgc.flower.transport import Transport
from fedgc.flower.update_record import encode_update


@dataclass
class DownlinkRound:
    """What one round's downloads carried."""

    compressed: int = 0
    resets: int = 0
    elements_sent: int = 0
    elements_total: int = 0
    # What each node holds once it applies its download, in message order (``DownlinkStage.confirm``).
    flights: list[_InFlight] = field(default_factory=list, repr=False)

    @property
    def density(self) -> float | None:
        return self.elements_sent / self.elements_total if self.elements_total else None


@dataclass
class _InFlight:
    node: int
    replica: Weights
    digest: str


class DownlinkStage:
    def __init__(self, config: DownlinkConfig, initial: Weights, seed: int) -> None:
        self.config = config
        self.compressor = config.compressor()
        self.seed = seed
        self.initial = as_replica(initial)
        self.initial_digest = model_digest(self.initial)
        self.replicas: dict[int, tuple[Weights, str]] = {}  # confirmed (replica, digest); absent: initial
        self.unsure: set[int] = set()  # nodes whose replica is not known: their next download is a reset
        self.in_flight: dict[str, _InFlight] = {}  # message id → what the node holds once it applies it

    def settle_waiting(self, transport: Transport, nodes: set[int]) -> None:
        """Before a round's downloads to ``nodes``: replies to their earlier downloads that the exchange
        stopped waiting for (a deadline, or the first K were in) may have arrived since, and confirm the
        replica; a download still unanswered leaves its node's replica in doubt (its next is a reset)."""
        waiting = [i for i, f in self.in_flight.items() if f.node in nodes]
        if waiting:
            self._settle(transport.pull_messages(waiting))
        for message_id in waiting:
            flight = self.in_flight.pop(message_id, None)
            if flight is not None:
                self.unsure.add(flight.node)

    def encode(self, messages: list[Message]) -> DownlinkRound:
        """Rewrite each training message in place: a compressed difference, or a reset (the dense model)."""
        stats = DownlinkRound()
        targets: dict[int, Weights] = {}  # the strategy sends one ArrayRecord to every node: decode it once
        for message in messages:
            record = message.content.array_records[keys.ARRAYS]
            if id(record) not in targets:
                targets[id(record)] = as_replica(record.to_torch_state_dict())
            stats.flights.append(self._encode(message, targets[id(record)], stats))
        return stats

    def confirm(self, downloads: DownlinkRound, ids: list[str | None], pulled: list[Message]) -> None:
        """After the exchange: the downloads pushed (``ids``, the transport's message ids in message
        order; None: not pushed) are in flight, and every reply received (cut or late on the network or
        not) confirms what its node holds. A download not pushed leaves its node's replica in doubt."""
        for flight, message_id in zip(downloads.flights, ids):
            if message_id:
                self.in_flight[message_id] = flight
            else:
                self.unsure.add(flight.node)
        self._settle(pulled)

    def _encode(self, message: Message, target: Weights, stats: DownlinkRound) -> _InFlight:
        node = message.metadata.dst_node_id
        config = ConfigRecord(dict(message.content.config_records[keys.CONFIG]))
        if node in self.unsure:
            config[RESET] = True
            message.content = _with_client_config(
                RecordDict({keys.ARRAYS: message.content.array_records[keys.ARRAYS], keys.CONFIG: config}), message)
            stats.resets += 1
            return _InFlight(node, target, model_digest(target))
        base, base_digest = self.replicas.get(node, (self.initial, self.initial_digest))
        round_seed = int(config.get(keys.SERVER_ROUND, 0))
        generator = torch.Generator().manual_seed(client_seed(self.seed, node, round_seed))
        download = make_download(target, base, self.config, self.compressor, generator)
        digest = model_digest(download.replica)
        config[BASE_DIGEST], config[NEW_DIGEST] = base_digest, digest
        message.content = _with_client_config(
            RecordDict({DELTA_KEY: encode_update(download.payloads), keys.CONFIG: config}), message)
        stats.compressed += 1
        stats.elements_sent += download.elements_sent
        stats.elements_total += download.elements_total
        return _InFlight(node, download.replica, digest)

    def _settle(self, replies) -> None:
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

    # Checkpoints ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        # Replicas are replaced, never changed in place: the checkpoint can hold them as they are.
        return {"replicas": dict(self.replicas),
                "unsure": sorted(self.unsure | {f.node for f in self.in_flight.values()})}

    def load_state_dict(self, state: dict) -> None:
        self.replicas = {int(n): (r, d) for n, (r, d) in state["replicas"].items()}
        self.unsure = set(state["unsure"])
        self.in_flight.clear()


def _with_client_config(content: RecordDict, message: Message) -> RecordDict:
    """``content`` with the message's client-config record, if it has one (it travels unchanged)."""
    if keys.CLIENT_CONFIG in message.content.config_records:
        content[keys.CLIENT_CONFIG] = message.content.config_records[keys.CLIENT_CONFIG]
    return content
