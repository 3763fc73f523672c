"""Replies from a SuperLink, each handed over as soon as its last object is in.

Flower's ``HttpGrid.pull_messages`` (the grid a ServerApp gets on a real deployment) lists a reply as
soon as its sender has pushed the message header, i.e. when the upload *starts*, and then pulls the
reply's objects, retrying a missing one after 1 s, 2 s, 4 s … (at most 10 s apart, ±20 % jitter:
``pull_objects`` in ``flwr/supercore/inflatable/inflatable_utils.py``). That costs fedgc's loop twice:
the server holds a reply up to 10 s after its last byte arrived (0.4–8.4 s measured on shaped links,
docs/sim-to-real.md), and while one reply is still uploading, the call blocks every other reply and
the loop's own deadline and keep-first rule with it.

``SuperLinkGrid`` makes the same requests on another schedule: a listed reply is remembered with its
object tree, and each ``pull_messages`` call tries its missing objects once, in the tree's order,
stopping at the first one not there yet; a reply is confirmed, inflated and returned (as Flower does)
once every object is in. fedgc's loop calls every 0.05 s (``partition_grid.POLL_INTERVAL_S``), so a
reply is held within one poll of its last byte, and a slow upload holds up nothing else. An object the
SuperLink has lost (its sender's push session expired) gives an error reply, as Flower's grid does.

It reads three internals of Flower 1.41–1.42's ``HttpGrid`` (``_runtime_client``, ``_run``, ``node``);
:func:`collecting` hands back the grid unchanged when they are not there, so another Flower version
still runs, with Flower's own schedule.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from flwr.app import Message, Metadata
from flwr.app.error import Error
from flwr.app.message import make_message
from flwr.common.constant import ErrorCode
from flwr.proto.message_pb2 import ConfirmMessageReceivedRequest  # pylint: disable=E0611
from flwr.proto.runtime_pb2 import PullAppMessagesRequest  # pylint: disable=E0611
from flwr.serverapp import Grid
from flwr.supercore.constant import SYSTEM_MESSAGE_TYPE
from flwr.supercore.date import now
from flwr.supercore.inflatable.inflatable_object import iterate_object_tree
from flwr.supercore.inflatable.inflatable_protobuf_utils import make_pull_object_fn_protobuf
from flwr.supercore.inflatable.inflatable_utils import (
    ObjectPullError,
    ObjectUnavailableError,
    inflate_object_from_contents,
)
from flwr.supercore.run import Run
from flwr.superlink.grid.http_grid import HttpGrid

from fedgc.flower.internals import set_message_id
from fedgc.flower.server.partition_grid import poll_replies

logger = logging.getLogger(__name__)


@dataclass
class _Listed:
    """A reply the SuperLink has listed, whose objects are being collected."""

    message_id: str
    reply_to: str
    object_ids: list[str]  # the tree in post order: children first, the message last
    contents: dict[str, bytes] = field(default_factory=dict)


class SuperLinkGrid(Grid):
    """Flower's ``HttpGrid`` with replies collected as they complete; see the module docstring."""

    def __init__(self, inner: Grid) -> None:
        self.inner = inner
        self.listed: dict[str, _Listed] = {}  # by the id of the message it answers
        self.node_of: dict[str, int] = {}  # the node each pushed message went to, until it is answered

    # Delegation ---------------------------------------------------------------------------------
    def set_run(self, run: Run) -> None:
        self.inner.set_run(run)

    @property
    def run(self) -> Run:
        return self.inner.run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return self.inner.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        return self.inner.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        nodes = [m.metadata.dst_node_id for m in messages]
        # A node's earlier message that is still unanswered will not be asked for again (the loop
        # asks before it sends that node anything new): what was collected of its reply is dropped.
        for old in [i for i, n in self.node_of.items() if n in set(nodes)]:
            self.node_of.pop(old)
            self.listed.pop(old, None)
        ids = list(self.inner.push_messages(messages))
        self.node_of.update({i: n for i, n in zip(ids, nodes) if i})
        return ids

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        ids = list(self.push_messages(messages))
        return poll_replies(self, ids, None if timeout is None else time.monotonic() + timeout)

    # Collection ---------------------------------------------------------------------------------
    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        wanted = [i for i in message_ids if i]
        client = self.inner._runtime_client  # Flower internals: see the module docstring
        new = [i for i in wanted if i not in self.listed]
        if new:
            response = client.PullMessages(PullAppMessagesRequest(message_ids=new))
            for proto, tree in zip(response.messages_list, response.message_object_trees, strict=True):
                reply_to = proto.metadata.reply_to_message_id
                self.listed[reply_to] = _Listed(proto.metadata.message_id, reply_to,
                                                [t.object_id for t in iterate_object_tree(tree)])
        pull = make_pull_object_fn_protobuf(pull_object_protobuf=client.PullObject, node=self.inner.node,
                                            run_id=self.inner._run.run_id)
        complete = []
        for reply_to in wanted:
            listed = self.listed.get(reply_to)
            if listed is None:
                continue
            try:
                done = self._collect(listed, pull)
            except ObjectPullError as error:
                del self.listed[reply_to]
                complete.append(self._unavailable(listed, error, self.node_of.pop(reply_to, None)))
                continue
            if done:
                del self.listed[reply_to]
                self.node_of.pop(reply_to, None)
                client.ConfirmMessageReceived(ConfirmMessageReceivedRequest(
                    node=self.inner.node, run_id=self.inner._run.run_id,
                    message_object_id=listed.message_id))
                message = inflate_object_from_contents(listed.message_id, listed.contents)
                set_message_id(message.metadata, listed.message_id)  # as Flower's grid sets it
                complete.append(message)
        return complete

    @staticmethod
    def _collect(listed: _Listed, pull) -> bool:
        """Pull the reply's missing objects in order until one is not there yet; True when all are in."""
        for object_id in listed.object_ids:
            if object_id in listed.contents:
                continue
            try:
                listed.contents[object_id] = pull(object_id)
            except ObjectUnavailableError:
                return False
        return True

    def _unavailable(self, listed: _Listed, error: ObjectPullError, sender: int | None) -> Message:
        """The error reply Flower's grid gives for a reply whose objects cannot be pulled, but from
        the node that sent it (Flower's names the SuperLink) so that the failure is that node's."""
        run_id = self.inner._run.run_id
        node = self.inner.node.node_id if sender is None else sender
        logger.warning("reply %s: its objects cannot be pulled (%s)", listed.message_id, error)
        return make_message(
            metadata=Metadata(run_id=run_id, message_id="", src_node_id=node,
                              dst_node_id=self.inner.node.node_id,
                              message_type=SYSTEM_MESSAGE_TYPE, group_id="", ttl=0,
                              reply_to_message_id=listed.reply_to, created_at=now().timestamp()),
            error=Error(code=ErrorCode.MESSAGE_UNAVAILABLE,
                        reason=f"Reply message objects are unavailable: {error}"))


def collecting(grid: Grid) -> Grid:
    """``grid`` with replies collected as they complete when it is Flower's ``HttpGrid`` (the
    internals this reads are there), else ``grid`` itself."""
    if not isinstance(grid, HttpGrid):  # Flower 1.41 and 1.42 both: flwr.superlink.grid.http_grid
        return grid
    return SuperLinkGrid(grid)
