"""The ``inline`` engine: a Flower ``Grid`` that runs the ClientApp in this process.

Every message and every reply is serialized exactly as Flower would put it on the wire and rebuilt
from those bytes (``wire.roundtrip``), so the ClientApp and the strategy only ever see what a real
deployment would deliver, and the byte counts are real wire sizes. Node ids are 1..N in partition
order and message ids a counter, so a run is deterministic for a seed.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.run import Run

from fedgc.flower.wire import roundtrip

CLIENT_APP_EXCEPTION = 101  # Error.code for a ClientApp that raised (same meaning as Flower's)


class InlineGrid(Grid):
    def __init__(self, client_app: ClientApp, num_nodes: int, run_config: dict, run_id: int = 1) -> None:
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
