"""A ``Grid`` around another grid: every call goes to ``inner`` unless a subclass changes it.

fedgc stacks grids (``NetworkGrid`` around ``PartitionGrid`` around Flower's grid), each changing one
thing; this base class holds the plain delegation once.
"""

from __future__ import annotations

from collections.abc import Iterable

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.run import Run


class WrappedGrid(Grid):
    def __init__(self, inner: Grid) -> None:
        self.inner = inner

    # The transport's wire-byte tables (``InlineGrid.sent_bytes`` / ``reply_bytes``), seen through
    # wrappers; None where the transport keeps none (the size is then computed from the message).
    @property
    def sent_bytes(self) -> dict[str, int] | None:
        return getattr(self.inner, "sent_bytes", None)

    @property
    def reply_bytes(self) -> dict[str, int] | None:
        return getattr(self.inner, "reply_bytes", None)

    def set_run(self, run: Run) -> None:
        self.inner.set_run(run)

    @property
    def run(self) -> Run:
        return self.inner.run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return self.inner.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        return self.inner.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self.inner.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self.inner.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self.inner.send_and_receive(messages, timeout=timeout)
