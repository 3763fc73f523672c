"""A client's whole state (``Context.state``, a ``RecordDict``) as bytes and back, for the disk store
(``fedgc.flower.state.disk_store``): lossless, one copy of the data."""

from __future__ import annotations

import json

from flwr.app import RecordDict
from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

from fedgc.flower.state.client_state import array_record, new_array

MAGIC = b"fedgc-state 1\n"


def encode_state(state: RecordDict) -> bytes:
    """``state`` as bytes, losslessly: a JSON header naming each array record's arrays (dtype, shape,
    storage type, size), their bytes as they are, then any config and metric records as Flower's
    protobuf. One copy of the data (Flower's protobuf alone copies it twice)."""
    header, chunks = {"arrays": [], "rest": 0}, []
    for name, record in state.array_records.items():
        arrays = []
        for key, array in record.items():
            arrays.append([key, array.dtype, list(array.shape), array.stype, len(array.data)])
            chunks.append(array.data)
        header["arrays"].append([name, arrays])
    rest = RecordDict({**state.config_records, **state.metric_records})
    if len(rest):
        chunks.append(recorddict_to_proto(rest).SerializeToString())
        header["rest"] = len(chunks[-1])
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([MAGIC, len(head).to_bytes(4, "little"), head, *chunks])


def decode_state(data: bytes) -> RecordDict:
    """``encode_state``'s inverse; anything that does not fit its own header raises."""
    if not data.startswith(MAGIC):
        raise ValueError("not a stored client state")
    view = memoryview(data)
    at = len(MAGIC) + 4
    size = int.from_bytes(view[len(MAGIC):at], "little")
    header = json.loads(bytes(view[at:at + size]))
    at += size
    state = RecordDict()
    for name, arrays in header["arrays"]:
        record = {}
        for key, dtype, shape, stype, nbytes in arrays:
            if not (isinstance(nbytes, int) and 0 <= nbytes <= len(data) - at):
                raise ValueError("an array runs past the end")
            record[str(key)] = new_array(str(dtype), tuple(int(d) for d in shape), str(stype), bytes(view[at:at + nbytes]))
            at += nbytes
        state[str(name)] = array_record(record)
    rest = header["rest"]
    if not (isinstance(rest, int) and rest == len(data) - at):
        raise ValueError("the records after the arrays do not fill the rest")
    if rest:
        proto = ProtoRecordDict()
        proto.ParseFromString(bytes(view[at:]))
        for name, record in recorddict_from_proto(proto).items():
            state[name] = record
    return state
