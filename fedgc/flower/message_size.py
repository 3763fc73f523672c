"""Flower's own serialization of a message, for byte counts and for in-process round trips.

Flower 1.x transports a ``Message`` as a tree of inflatable objects (message → RecordDict →
records → arrays → array chunks), each sent as its deflated bytes. The wire size of a message is
the sum of those byte strings: what a SuperNode and SuperLink actually exchange (gRPC framing aside).

A round sends one global model to every selected client: the same ``ArrayRecord`` object in each
message. Its subtree is serialized (and, for a round trip, rebuilt) once, and its bytes reused for
the other messages while the record is unchanged: Flower's own change tracking (an ``ArrayRecord``
or ``Array`` that was written since its id was computed is dirty) says when, and the id is the
SHA-256 of the bytes, so the reused bytes are the ones Flower would send (tests/test_message_size.py
holds every size and rebuilt message equal to a fresh serialization's). The strategy's client-config
(one ``ConfigRecord`` in every message) has no change tracking: its bytes are reused while its
content, compared value by value with each value's type and a float's bits, is what they were
deflated from. A message's records are walked without Flower's ``children`` (which deflates every
record below a message once more, to list it by id, before the walk reaches it).
"""

from __future__ import annotations

import json
import struct
from collections import OrderedDict

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.supercore.inflatable.inflatable_object import (
    InflatableObject,
    get_all_nested_objects,
    get_object_body,
    get_object_id,
    no_object_id_recompute,
)
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

from fedgc.flower.internals import cached_object_id, set_message_id
from fedgc.flower.state.client_state import array_record, new_array

MAX_CACHED_RECORDS = 4  # the global model of this round and a few before it
MAX_CACHED_BYTES = 1 << 30


class _Subtree:
    """The deflated objects below (and including) one unchanged ``ArrayRecord``, and their inflated copies."""

    def __init__(self, record_id: str, contents: dict[str, bytes]) -> None:
        self.record_id = record_id
        self.contents = contents
        self.nbytes = sum(len(b) for b in contents.values())
        self.inflated: dict[str, InflatableObject] = {}  # its arrays and chunks, rebuilt once from the bytes
        self.refs: dict[str, str] | None = None  # the record's {name: array id}, read once from its bytes

    def record(self) -> ArrayRecord:
        """A record of its own, as Flower's ``ArrayRecord.inflate`` builds one from the rebuilt arrays:
        a new ``Array`` of each (the bytes shared), without Flower's per-item checks (the arrays are
        the ones Flower rebuilt: ``fedgc.flower.state.client_state.array_record``)."""
        if self.refs is None:
            refs = json.loads(get_object_body(self.contents[self.record_id], ArrayRecord).decode("utf-8"))
            self.refs = {str(name): str(array_id) for name, array_id in refs.items()}
        arrays = {}
        for name, array_id in self.refs.items():
            array = self.inflated[array_id]
            assert isinstance(array, Array)
            arrays[name] = new_array(array.dtype, tuple(array.shape), array.stype, array.data)
        return array_record(arrays)


_subtrees: OrderedDict[str, _Subtree] = OrderedDict()

# The deflated bytes of a ``ConfigRecord``, by the object id Flower computed for it, with the content
# they were computed from: the same record object in every message of a round (the strategy's
# client-config, tens of values) is deflated and hashed once, not twice a message.
MAX_CACHED_CONFIGS = 64
_configs: OrderedDict[str, tuple[tuple[object, ...], bytes]] = OrderedDict()
_DOUBLE = struct.Struct("<d")
# The config records Flower rebuilt from those bytes, by their object id (the SHA-256 of the bytes:
# the same id, the same content): each later message gets a copy (``_config_copy``), not a new parse.
_config_records: OrderedDict[str, ConfigRecord] = OrderedDict()


def _config_copy(record: ConfigRecord) -> ConfigRecord:
    """A ``ConfigRecord`` of its own with ``record``'s items (a list value copied), as Flower's
    ``ConfigRecord.inflate`` builds it, without its per-item checks (``record``'s items passed them)."""
    copy = ConfigRecord()
    copy.__dict__["_data"].update({key: list(value) if isinstance(value, list) else value
                                   for key, value in record.items()})
    return copy


def _exactly(value: object) -> object:
    """``value`` as a key that differs wherever Flower's serialization of it can: by type (1, 1.0 and
    True are equal in Python) and, for a float, by its bits (-0.0, NaN payloads)."""
    if type(value) is float:
        return float, _DOUBLE.pack(value)
    if type(value) is list:
        return list, tuple(_exactly(v) for v in value)
    return type(value), value


def config_content(record: ConfigRecord) -> tuple[object, ...]:
    """A ``ConfigRecord``'s content as a hashable key, equal only where Flower serializes both the
    same (keys in order, each value's type, a float's bits)."""
    return tuple((key, _exactly(value)) for key, value in record.items())


_content = config_content


def _unchanged_id(record: InflatableObject) -> str | None:
    """The id of an ``ArrayRecord`` whose content has not changed since its id was computed."""
    if isinstance(record, ArrayRecord) and not record.is_dirty:
        return cached_object_id(record)
    return None


def _remember(object_id: str, subtree: _Subtree) -> None:
    _subtrees[object_id] = subtree
    _subtrees.move_to_end(object_id)
    while len(_subtrees) > MAX_CACHED_RECORDS or sum(s.nbytes for s in _subtrees.values()) > MAX_CACHED_BYTES:
        _subtrees.popitem(last=False)


def _deflate(message: Message) -> tuple[str, dict[str, bytes], list[_Subtree], list[str]]:
    """(message id, contents, the kept subtrees reused, the ids of the config records whose bytes are
    checked to be their id's: the SHA-256 of those bytes)."""
    contents: dict[str, bytes] = {}
    reused: list[_Subtree] = []
    configs: list[str] = []

    def walk(obj: InflatableObject) -> None:  # post-order, as Flower's get_all_nested_objects
        known = _unchanged_id(obj)
        if known is not None and known in _subtrees:
            subtree = _subtrees[known]
            _subtrees.move_to_end(known)
            contents.update(subtree.contents)
            reused.append(subtree)
            _computed_ids().add(known)  # its parent's header lists it by id: known, not hashed again
            return
        if isinstance(obj, ArrayRecord):
            below = {object_id: o.deflate() for object_id, o in get_all_nested_objects(obj).items()}
            contents.update(below)
            if _unchanged_id(obj) is not None:
                _remember(obj.object_id, _Subtree(obj.object_id, below))
            return
        if isinstance(obj, ConfigRecord):
            content = _content(obj)
            # The id Flower kept when it last computed it (the content may differ now); the same internal
            # as an ArrayRecord's (fedgc.flower.internals, typed there for ArrayRecord).
            known = cached_object_id(obj)
            seen = _configs.get(known) if known is not None else None
            if known is not None and seen is not None and seen[0] == content:
                _configs.move_to_end(known)
                contents[known] = seen[1]
                configs.append(known)
                _computed_ids().add(known)  # its parent's header lists it by id: known, not hashed again
                return
            object_id, body = obj.object_id, obj.deflate()
            contents.setdefault(object_id, body)
            if get_object_id(body) == object_id:  # not an id Flower kept for content this record no longer has
                _configs[object_id] = (content, body)
                configs.append(object_id)
                _configs.move_to_end(object_id)
                if len(_configs) > MAX_CACHED_CONFIGS:
                    _configs.popitem(last=False)
            return
        for child in _children(obj):
            walk(child)
        contents.setdefault(obj.object_id, obj.deflate())

    with no_object_id_recompute():
        walk(message)
        return message.object_id, contents, reused, configs


def _children(obj: InflatableObject) -> list[InflatableObject]:
    """``obj.children``'s objects, without their ids: Flower's ``children`` of a message or a record
    dict computes every id below it first (deflating each record once more than serializing needs)."""
    if isinstance(obj, Message):
        return [obj.content] if obj.has_content() else []
    if isinstance(obj, RecordDict):
        return list(obj.values())
    return list((obj.children or {}).values())


def _computed_ids() -> set[str]:
    """The ids Flower treats as known within ``no_object_id_recompute`` (its thread-local set)."""
    from flwr.supercore.inflatable import inflatable_object

    return inflatable_object._get_computed_object_ids()  # the one Flower internal used here


def deflate_message(message: Message) -> tuple[str, dict[str, bytes]]:
    """(object id of the message, {object id: deflated bytes}) for the whole object tree.

    As Flower does when it pushes a message, each object's id (the SHA-256 of its deflated bytes) is
    computed once per call, not again for every parent whose header lists it; an unchanged
    ``ArrayRecord`` seen before (the round's global model) is not serialized again.
    """
    object_id, contents, _, _ = _deflate(message)
    return object_id, contents


def wire_size(contents: dict[str, bytes]) -> int:
    return sum(len(blob) for blob in contents.values())


def message_wire_size(message: Message) -> int:
    return wire_size(deflate_message(message)[1])


def roundtrip(message: Message) -> tuple[Message, int]:
    """Serialize ``message`` as Flower would send it and rebuild it from those bytes alone (an
    unchanged ``ArrayRecord`` seen before: its arrays rebuilt from its bytes once, then shared, each
    message getting a record of its own)."""
    object_id, contents, reused, configs = _deflate(message)
    size = wire_size(contents)
    objects: dict[str, InflatableObject] = {}
    for config_id in configs:  # a config record rebuilt before from these very bytes: a copy of it
        template = _config_records.get(config_id)
        if template is not None:
            objects[config_id] = _config_copy(template)
    for subtree in reused:
        objects.update(subtree.inflated)
        if subtree.inflated:  # rebuilt before: this message's record from its arrays, as Flower would
            objects[subtree.record_id] = subtree.record()
    rebuilt = inflate_object_from_contents(object_id, contents, keep_object_contents=True, objects=objects)
    for subtree in reused:
        if not subtree.inflated:  # keep the arrays (not the records: each message gets its own)
            subtree.inflated = {i: o for i, o in objects.items()
                                if i in subtree.contents and not isinstance(o, ArrayRecord)}
    for config_id in configs:
        inflated = objects.get(config_id)
        if config_id not in _config_records and isinstance(inflated, ConfigRecord):
            _config_records[config_id] = _config_copy(inflated)
            if len(_config_records) > MAX_CACHED_CONFIGS:
                _config_records.popitem(last=False)
    assert isinstance(rebuilt, Message)
    # The message id is transport metadata, excluded from the deflated body; carry it over.
    set_message_id(rebuilt.metadata, message.metadata.message_id)
    return rebuilt, size
