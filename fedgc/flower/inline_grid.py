"""The ``inline`` engine: a Flower ``Grid`` that runs the ClientApp in this process.

Every message and every reply is serialized exactly as Flower would put it on the wire and rebuilt
from those bytes (``wire.roundtrip``), so the ClientApp and the strategy only ever see what a real
deployment would deliver, and the byte counts are real wire sizes. Node ids are 1..N in partition
order and message ids a counter, so a run is deterministic for a seed.

The grid pins PyTorch's intra-op threads (process-wide) to ``FEDGC_THREADS`` (``fedgc.run.threads``).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.run import Run

from fedgc.flower.client_state import context_state, restore_context_state
from fedgc.flower.wire import roundtrip
from fedgc.run.threads import pin_threads

CLIENT_APP_EXCEPTION = 101  # Error.code for a ClientApp that raised (same meaning as Flower's)


class InlineGrid(Grid):
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
        self._replies: dict[str, Message] = {}
        # Wire bytes of the last message pushed to / replied by each message id.
        self.sent_bytes: dict[str, int] = {}
        self.reply_bytes: dict[str, int] = {}

    @classmethod
    def for_scenario(cls, scenario, client_app: ClientApp | None = None) -> InlineGrid:
        """The inline engine's transport for ``scenario`` (fedgc's ClientApp unless another is given),
        with Flower's task identity set as the ServerApp's (the one place that sets it)."""
        from flwr.common.constant import SUPERLINK_NODE_ID
        from flwr.supercore.task_identity import TaskIdentity

        from fedgc.flower.setup import SCENARIO_YAML
        from fedgc.scenario import dump_scenario

        if client_app is None:
            from fedgc.flower.client_app import app as client_app
        grid = cls(client_app, scenario.data.num_clients, {SCENARIO_YAML: dump_scenario(scenario)})
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, grid.run.run_id, SUPERLINK_NODE_ID
        return grid

    def state_dict(self) -> dict:
        """The clients' ``Context.state`` (those that hold any) and the message counter."""
        return {"contexts": {node: context_state(ctx) for node, ctx in self.contexts.items() if len(ctx.state)},
                "next_message_id": self.next_message_id}

    def load_state_dict(self, state: dict) -> None:
        unknown = set(state["contexts"]) - set(self.contexts)
        if unknown:
            raise ValueError(f"it holds state for node {min(unknown)}, which this scenario does not have")
        if type(state["next_message_id"]) is not int or state["next_message_id"] < 0:
            raise TypeError("next_message_id is not a count")
        for node, saved in state["contexts"].items():
            restore_context_state(self.contexts[node], saved)
        self.next_message_id = state["next_message_id"]

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
        ids = []
        for message in messages:
            self.next_message_id += 1
            message_id = f"m{self.next_message_id:08d}"
            message.metadata.__dict__["_message_id"] = message_id
            delivered, size = roundtrip(message)
            self.sent_bytes[message_id] = size
            reply = self._execute(delivered)
            reply.metadata.__dict__["_message_id"] = f"r{self.next_message_id:08d}"
            returned, reply_size = roundtrip(reply)
            self.reply_bytes[message_id] = reply_size
            self._replies[message_id] = returned
            ids.append(message_id)
        return ids

    def _execute(self, message: Message) -> Message:
        context = self.contexts[message.metadata.dst_node_id]
        try:
            return self.client_app(message, context)
        except Exception as err:  # noqa: BLE001 — a failing client is a counted failure, not a crashed run
            reason = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}"
            return Message(Error(code=CLIENT_APP_EXCEPTION, reason=reason), reply_to=message)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))
