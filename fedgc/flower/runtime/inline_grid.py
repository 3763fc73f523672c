"""The ``inline`` engine: a Flower ``Grid`` that runs the ClientApp in this process.

Every message and every reply is serialized exactly as Flower would put it on the wire and rebuilt
from those bytes (``wire.roundtrip``), so the ClientApp and the strategy only ever see what a real
deployment would deliver, and the byte counts are real wire sizes. Node ids are 1..N in partition
order and message ids a counter, so a run is deterministic for a seed.

The grid pins PyTorch's intra-op threads (process-wide) to ``FEDGC_THREADS`` (``fedgc.core.threads``).
"""

from __future__ import annotations

import traceback
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from flwr.app import Context, Error, Message, MessageType, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.run import Run

from fedgc.core.threads import pin_threads
from fedgc.execution.device import resolve_device
from fedgc.flower.client.batched import BatchedUpdate, RoundTrainer, handing_over
from fedgc.flower.internals import set_message_id
from fedgc.flower.message_size import roundtrip
from fedgc.flower.state.client_store import STORE_FILE, MemoryStore, message_generation, store_kind
from fedgc.flower.state.disk_store import DamagedState, StoreError, open_disk_store, release_store, release_under
from fedgc.flower.state.store_thread import ThreadedStore
from fedgc.flower.transport import Transport
from fedgc.runs.temporary_folders import TemporaryFolder

CLIENT_APP_EXCEPTION = 101  # Error.code for a ClientApp that raised (same meaning as Flower's)
STORE_DIR_PREFIX = "fedgc-client-state-"  # the temporary folder of a disk store when a run has no run folder


T = TypeVar("T")


class InlineGrid(Transport):
    def __init__(self, client_app: ClientApp, num_nodes: int, run_config: dict, run_id: int = 1) -> None:
        self.threads = pin_threads()
        self.client_app = client_app
        self._run = Run.create_empty(run_id=run_id)
        self._run.override_config = dict(run_config)
        self.contexts: dict[int, Context] = {
            node_id: Context(
                run_id=run_id,
                node_id=node_id,
                node_config={"partition-id": node_id - 1, "num-partitions": num_nodes},
                state=RecordDict(),
                run_config=dict(run_config),
            )
            for node_id in range(1, num_nodes + 1)
        }
        self.next_message_id = 0
        # Where the clients' states wait between their turns (fedgc.flower.state.client_store): by default in
        # their contexts; ``use_disk_store`` moves them to a file, loaded for a message and written after.
        self.store: MemoryStore | ThreadedStore = MemoryStore(self.contexts)
        self._store_dir: TemporaryFolder | None = None
        # A round's train messages, handed over before any is delivered: ``client.execution:
        # vectorized`` trains them together and the grid hands each result to its message's ClientApp
        # call (fedgc.flower.client.batched.handing_over). The grid itself trains nothing.
        self.train_together: RoundTrainer | None = None
        self._replies: dict[str, Message] = {}
        # Wire bytes of the last message pushed to / replied by each message id.
        self.sent_bytes: dict[str, int] = {}
        self.reply_bytes: dict[str, int] = {}

    @classmethod
    def for_scenario(cls, scenario, client_app: ClientApp | None = None, out_dir: Path | None = None) -> InlineGrid:
        """The inline engine's transport for ``scenario`` (fedgc's ClientApp unless another is given),
        with Flower's task identity set as the ServerApp's (the one place that sets it). With
        ``client_state.store`` on disk, the store is ``out_dir``'s (a temporary folder without one)."""
        from flwr.common.constant import SUPERLINK_NODE_ID
        from flwr.supercore.task_identity import TaskIdentity

        from fedgc.flower.setup import SCENARIO_YAML
        from fedgc.scenario.model import dump_scenario

        if client_app is None:
            from fedgc.flower.client.client_app import app as client_app
        grid = cls(client_app, scenario.data.num_clients, {SCENARIO_YAML: dump_scenario(scenario)})
        device = resolve_device(scenario.device)
        if scenario.client.execution == "vectorized" or (scenario.client.execution == "auto" and device.type == "cuda"):
            from fedgc.flower.runtime.round_training import RoundTraining

            grid.train_together = RoundTraining(device)
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, grid.run.run_id, SUPERLINK_NODE_ID
        if store_kind(scenario) == "disk":
            grid.use_disk_store(out_dir)
        return grid

    def use_disk_store(self, out_dir: Path | None) -> None:
        """Keep the clients' states in ``out_dir/client-state.sqlite`` (a temporary folder, removed with
        the grid, when ``out_dir`` is None). A folder with a checkpoint is being resumed: its store is
        kept for ``load_state_dict``; any other folder's is started afresh."""
        from fedgc.runs.folder import CHECKPOINT

        if out_dir is None:
            self._store_dir = TemporaryFolder(STORE_DIR_PREFIX)
            weakref.finalize(self, _remove_store_dir, self._store_dir)
            out_dir = self._store_dir.path
        resuming = (Path(out_dir) / CHECKPOINT).is_file()
        # Its reads and writes on an I/O thread beside the turns (fedgc.flower.state.store_thread).
        self.store = ThreadedStore(open_disk_store(Path(out_dir) / STORE_FILE, fresh=not resuming))
        if self._store_dir is None:
            weakref.finalize(self, release_store, Path(out_dir) / STORE_FILE)

    def state_dict(self) -> dict:
        """The clients' states (in memory: those that hold any; on disk: the store's checkpoint
        mark, ``fedgc.flower.state.client_store``) and the message counter."""
        return {**self.store.state_dict(), "next_message_id": self.next_message_id}

    def load_state_dict(self, state: dict) -> None:
        unknown = set(state.get("contexts", {})) - set(self.contexts)
        if unknown:
            raise ValueError(f"it holds state for node {min(unknown)}, which this scenario does not have")
        if type(state["next_message_id"]) is not int or state["next_message_id"] < 0:
            raise TypeError("next_message_id is not a count")
        self.store.load_state_dict(state)
        self.next_message_id = state["next_message_id"]

    def sent_size(self, message_id: str) -> int | None:
        return self.sent_bytes.get(message_id)

    def reply_size(self, message_id: str) -> int | None:
        return self.reply_bytes.get(message_id)

    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        deliveries = []
        for message in messages:
            self.next_message_id += 1
            message_id = f"m{self.next_message_id:08d}"
            set_message_id(message.metadata, message_id)
            delivered, size = roundtrip(message)
            self.sent_bytes[message_id] = size
            deliveries.append((self.next_message_id, message_id, delivered))
        trained: dict[str, BatchedUpdate] = {}
        if self.train_together is not None:
            trained = self.train_together([d for _, _, d in deliveries if d.metadata.message_type == MessageType.TRAIN],
                                          self.in_client)
        if deliveries:
            self.store.prefetch(deliveries[0][2].metadata.dst_node_id)
        for at, (number, message_id, delivered) in enumerate(deliveries):
            if at + 1 < len(deliveries):  # the next turn's state, read while this one runs
                self.store.prefetch(deliveries[at + 1][2].metadata.dst_node_id)
            with handing_over(trained.get(delivered.metadata.message_id)):
                reply = self._execute(delivered)
            set_message_id(reply.metadata, f"r{number:08d}")
            returned, reply_size = roundtrip(reply)
            self.reply_bytes[message_id] = reply_size
            self._replies[message_id] = returned
        self.store.flush()  # every state of the round written (a failed write stops the run in its round)
        return [message_id for _, message_id, _ in deliveries]

    def in_client(self, message: Message, call: Callable[[Context], T]) -> T:
        """``call(context)`` with the context of ``message``'s node holding its client's state (read only)."""
        context = self.contexts[message.metadata.dst_node_id]
        return self._with_state(context, lambda: call(context))

    def _with_state(self, context: Context, call, generation: int | None = None):
        """``call()`` with ``context`` holding its client's state from the store; with ``generation``
        (the message's round) the state is written back after, whatever ``call`` does."""
        node = context.node_id
        context.state = self.store.load(node)
        try:
            return call()
        finally:
            if generation is not None:
                self.store.save(node, generation, context.state)
            if self.store.kind != "memory":
                context.state = RecordDict()

    def _execute(self, message: Message) -> Message:
        context = self.contexts[message.metadata.dst_node_id]
        generation = message_generation(message)
        try:
            return self._with_state(context, lambda: self.client_app(message, context),
                                    self.store.generation if generation is None else generation)
        except StoreError as err:
            if not isinstance(err, DamagedState):
                raise  # the run's own storage failed (one line): not the client's fault
            return Message(Error(code=CLIENT_APP_EXCEPTION, reason=f"{type(err).__name__}: {err}"), reply_to=message)
        except Exception as err:  # noqa: BLE001 — a failing client is a counted failure, not a crashed run
            reason = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}"
            return Message(Error(code=CLIENT_APP_EXCEPTION, reason=reason), reply_to=message)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))


def _remove_store_dir(folder: TemporaryFolder) -> None:
    """Close the stores this process opened in ``folder``, then remove it."""
    release_under(folder.path)
    folder.cleanup()
