"""The transport fedgc's round loop drives, declared (``Transport``): Flower's ``Grid`` — node ids,
messages pushed and pulled — plus what the loop, the exchange and the downlink stage need of it to
account for bytes, to send whole models where a node holds no replica, and to checkpoint the clients.

Two implement it: ``InlineGrid`` (the inline engine: every ClientApp in this process) and
``PartitionGrid`` (Flower's runtimes: the simulation runtime's ``InMemoryGrid`` or a deployment's
SuperLink, behind the partition census). A new engine implements these methods; nothing in fedgc
probes a transport for attributes."""

from __future__ import annotations

from abc import abstractmethod

from flwr.serverapp import Grid

from fedgc.flower.state.client_state import saved_state_mismatch


class Transport(Grid):
    """Flower's ``Grid`` and fedgc's needs of it."""

    def sent_size(self, message_id: str) -> int | None:
        """The bytes the transport itself measured for the message it sent as ``message_id`` (None:
        it does not measure; the exchange then takes Flower's serialized size)."""
        return None

    def reply_size(self, message_id: str) -> int | None:
        """The bytes it measured for the reply to ``message_id`` (None: not measured)."""
        return None

    def nodes_without_replica(self) -> set[int]:
        """Nodes that said they hold no copy of the global model (a restarted device, a late joiner):
        their next compressed download must be the whole model."""
        return set()

    @abstractmethod
    def state_dict(self) -> dict:
        """The clients' states, for a checkpoint (``RuntimeError`` when a node does not answer)."""

    @abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Give each client back the state it had at the checkpoint (``ValueError`` if it cannot)."""

    def state_mismatch(self, state: dict, shapes: dict[str, tuple[int, ...]]) -> str | None:
        """How the clients' states of a checkpoint (``state_dict``'s ``contexts``) fail to fit the model
        (``shapes``: a memory or pending update of another shape, of no parameter, NaN...), or None: the
        resume refuses them (``fedgc.core.checkpoint.restore``) instead of every later round failing
        the client that holds them."""
        return saved_state_mismatch(state.get("contexts") if isinstance(state, dict) else None, shapes)
