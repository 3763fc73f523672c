"""Flower's own serialization of a message, for byte counts and for in-process round trips.

Flower 1.x transports a ``Message`` as a tree of inflatable objects (message → RecordDict →
records → arrays → array chunks), each sent as its deflated bytes. The wire size of a message is
the sum of those byte strings: what a SuperNode and SuperLink actually exchange (gRPC framing aside).
"""

from __future__ import annotations

from flwr.app import Message
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects, no_object_id_recompute
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents


def deflate_message(message: Message) -> tuple[str, dict[str, bytes]]:
    """(object id of the message, {object id: deflated bytes}) for the whole object tree.

    As Flower does when it pushes a message, each object's id (the SHA-256 of its deflated bytes) is
    computed once per call, not again for every parent whose header lists it.
    """
    with no_object_id_recompute():
        objects = get_all_nested_objects(message)
        return message.object_id, {object_id: obj.deflate() for object_id, obj in objects.items()}


def wire_size(contents: dict[str, bytes]) -> int:
    return sum(len(blob) for blob in contents.values())


def message_wire_size(message: Message) -> int:
    return wire_size(deflate_message(message)[1])


def roundtrip(message: Message) -> tuple[Message, int]:
    """Serialize ``message`` as Flower would send it and rebuild it from those bytes alone."""
    object_id, contents = deflate_message(message)
    size = wire_size(contents)
    rebuilt = inflate_object_from_contents(object_id, contents)
    assert isinstance(rebuilt, Message)
    # The message id is transport metadata, excluded from the deflated body; carry it over.
    rebuilt.metadata.__dict__["_message_id"] = message.metadata.message_id
    return rebuilt, size
