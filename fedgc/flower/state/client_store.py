"""Where stateful clients keep their ``Context.state`` between their turns: the client-state store.

A client's state (its compression memory, the updates it sent but has not heard were applied, its
downlink replica: ``fedgc.flower.client.client_app``, ``fedgc.flower.client.downlink_mod``) is loaded for the one
message it handles and written back after it. One interface, two stores (scenario key
``client_state.store``, docs/performance.md "How big"):

- ``MemoryStore``: the ``RecordDict`` objects themselves, in a dict (no copy, no serialization): the
  state of every client ever selected stays in RAM. Right for small populations.
- ``DiskStore``: an SQLite file (Python's own ``sqlite3``) in the run folder,
  ``<run>/client-state.sqlite``, one row per client and version, the ``RecordDict`` serialized as
  Flower puts it on the wire (lossless: every array's bytes as they were) behind a CRC-32 bound to
  the store, client and round. RAM holds only the states of the clients handling a message now,
  however large the population.

The disk store itself: ``fedgc.flower.state.disk_store``.
"""

from __future__ import annotations

from pathlib import Path

from flwr.app import Context, RecordDict

from fedgc.flower.keys import CLIENT_STORE_DIR
from fedgc.flower.state.client_state import records_state, state_records
from fedgc.flower.state.disk_store import StoreError, open_disk_store
from fedgc.scenario.model import Scenario

STORE_FILE = "client-state.sqlite"


class MemoryStore:
    """The states themselves, in this process, held by the clients' ``Context`` objects between turns
    (``load`` hands out the held object: no copy, no serialization)."""

    kind = "memory"
    generation = 0

    def __init__(self, contexts: dict[int, Context]) -> None:
        self.contexts = contexts

    def load(self, client: int) -> RecordDict:
        return self.contexts[client].state

    def save(self, client: int, generation: int, state: RecordDict) -> None:
        self.contexts[client].state = state

    def replace(self, client: int, state: RecordDict) -> None:
        self.save(client, 0, state)

    def prefetch(self, client: int) -> None:
        """(Nothing to read ahead: the states are in memory.)"""

    def flush(self) -> None:
        """(Nothing waits to be written.)"""

    def clients(self) -> list[int]:
        return sorted(c for c, context in self.contexts.items() if len(context.state))

    def nbytes(self) -> int:
        return sum(r.count_bytes() for c in self.contexts.values() for r in c.state.array_records.values())

    def state_dict(self) -> dict:
        """Every client's state, as plain tensors (a checkpoint holds them)."""
        return {"contexts": {c: records_state(ctx.state) for c, ctx in self.contexts.items() if len(ctx.state)}}

    def load_state_dict(self, state: dict) -> None:
        if "store" in state:
            raise StoreError("the checkpoint keeps the clients' states in a store on disk, this run in memory "
                             "(client_state.store)")
        for client, saved in state.get("contexts", {}).items():
            self.contexts[client].state = state_records(saved)

    def close(self) -> None:
        pass


def check_store_for_resume(state: dict, out_dir: Path) -> None:
    """Before a runtime whose nodes keep their states in ``out_dir``'s store starts (``engine: flower``
    on ``--resume``): the store holds the rows the checkpoint recorded (``state``: its transport part),
    else one ``CheckpointError`` line naming the store, not a failed runtime. Changes nothing; the
    ServerApp checks again as it takes the store back (``DiskStore.load_state_dict``)."""
    from fedgc.core.checkpoint import CHECKPOINT, CheckpointError
    from fedgc.flower.state.disk_store import DiskStore

    if not isinstance(state, dict) or "store" not in state:
        return  # a checkpoint holding the states itself: the store adopts them
    path = Path(out_dir) / STORE_FILE
    if not path.is_file():
        raise CheckpointError(f"client-state store {path} is missing: the checkpoint's client states are in it")
    store = None
    try:
        store = DiskStore(path)
        store.check_mark(state)
    except StoreError as err:
        raise CheckpointError(str(err)) from None
    except ValueError as err:  # the checkpoint's mark itself
        raise CheckpointError(f"{CHECKPOINT} is malformed (transport: {err})") from None
    finally:
        if store is not None:
            store.close()


def store_kind(scenario: Scenario, parameters: int | None = None) -> str:
    """``memory`` or ``disk`` for ``scenario`` (``client_state.store``; ``auto``: disk when every client
    holding fp32 momentum and velocity, 8 B per parameter, would pass ``client_state.auto_disk_gb``)."""
    store = scenario.client_state.store
    if store != "auto":
        return store
    if parameters is None:
        from fedgc.core.parts import federated_data
        from fedgc.models import estimated_parameters

        data = federated_data(scenario)
        parameters = estimated_parameters(scenario.model.name, data.input_shape, data.num_classes,
                                          scenario.model.options)
    return "disk" if 8 * parameters * scenario.data.num_clients > scenario.client_state.auto_disk_gb * 1e9 else "memory"


def message_generation(message) -> int | None:
    """The round a train message is for (its ``config`` record's ``server-round``), None for another
    message or a value that is not a round number."""
    from fedgc.flower import keys

    try:
        value = message.content.config_records[keys.CONFIG][keys.SERVER_ROUND]
    except (KeyError, TypeError, AttributeError):
        return None
    return value if type(value) is int and 0 <= value < 2**31 else None


def client_store_mod(msg, context, call_next):
    """A ClientApp mod: with ``client-store-dir`` in the run config, the node's state (by partition, the
    id the server knows it by) comes from the disk store for this message and goes back after; a
    restore query (``--resume``) replaces it. Without it (the inline engine, a deployment), nothing."""
    folder = context.run_config.get(CLIENT_STORE_DIR)
    if not folder:
        return call_next(msg, context)
    from fedgc.flower.keys import PARTITION_QUERY, RESTORE_QUERY

    if msg.metadata.message_type == PARTITION_QUERY:
        return call_next(msg, context)
    store = open_disk_store(Path(str(folder)) / STORE_FILE)
    client = int(context.node_config["partition-id"]) + 1
    if msg.metadata.message_type == RESTORE_QUERY:
        try:
            return call_next(msg, context)
        finally:
            store.replace(client, context.state)
            context.state = RecordDict()
    generation = message_generation(msg)
    context.state = store.load(client)
    try:
        return call_next(msg, context)
    finally:
        if generation is not None:
            store.save(client, generation, context.state)
        context.state = RecordDict()
