"""Flower messages as a grid and a node make them, for tests: the one place in tests/ that writes
Flower's private message metadata.

A Flower grid gives an instruction its id when it pushes it, in place (flwr 1.41–1.42 have no public setter:
its own grids write ``metadata.__dict__["_message_id"]``), and the strategy keeps the very objects it
configured, so a test that plays a grid must do the same: :func:`delivered`. A reply whose sender or
answered message is forged is built whole from a :class:`flwr.app.Metadata`: :func:`reply`.
"""

from __future__ import annotations

from flwr.app import Message, Metadata, RecordDict


def delivered(message: Message, message_id: str) -> Message:
    """``message`` as a grid leaves it once pushed: carrying ``message_id`` (set in place; returned)."""
    message.metadata.__dict__["_message_id"] = message_id  # as Flower's grids do (no public setter)
    return message


def instruction(content: RecordDict, dst_node_id: int, message_type: str, *, message_id: str) -> Message:
    """A server-side instruction to ``dst_node_id`` that a grid has already pushed (so it has its id)."""
    return delivered(Message(content, dst_node_id=dst_node_id, message_type=message_type), message_id)


def reply(to: Message, content: RecordDict, *, src_node_id: int | None = None,
          reply_to_message_id: str | None = None) -> Message:
    """A node's reply to ``to`` with ``content``, as Flower builds it; ``src_node_id`` forges the sender
    and ``reply_to_message_id`` the message it claims to answer."""
    made = Message(content, reply_to=to)
    if src_node_id is None and reply_to_message_id is None:
        return made
    m = made.metadata
    metadata = Metadata(run_id=m.run_id, message_id=m.message_id,
                        src_node_id=m.src_node_id if src_node_id is None else src_node_id,
                        dst_node_id=m.dst_node_id,
                        reply_to_message_id=m.reply_to_message_id if reply_to_message_id is None
                        else reply_to_message_id,
                        group_id=m.group_id, created_at=m.created_at, ttl=m.ttl, message_type=m.message_type,
                        src_task_id=m.src_task_id, dst_task_id=m.dst_task_id)
    metadata.delivered_at = m.delivered_at
    return Message(content, metadata=metadata)
