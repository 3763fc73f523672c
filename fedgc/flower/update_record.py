"""The Flower envelope of an update blob (``fedgc.wire``), in one of two forms (docs/wire-format.md,
"Framing"):

* one ``ArrayRecord`` holding one uint8 ``Array`` under ``UPDATE_KEY`` (the blob as a .npy file): every
  version-1 blob, and a v3 blob above ``MAX_COMPACT_BYTES``, which Flower splits into chunks;
* a v3 blob of at most ``MAX_COMPACT_BYTES``: one ``ConfigRecord`` holding the blob as one bytes value
  under ``BLOB_KEY`` (the compact form). Flower frames an ``Array`` and its ``ArrayRecord`` with about
  450 bytes of headers, object ids and the .npy header, which a small v3 blob does not need.

A receiver reads both forms, whatever the blob's version; only a node that declared v3 at the census
is sent a v3 blob (``fedgc.flower.wire_versions``), so never the compact form either. Checks in
order: the record (``bad-record``), the Array's dtype and shape fields (``bad-dtype``), its .npy data
(``bad-array``) or the compact record's one bytes value (``bad-record``), then the blob."""

from __future__ import annotations

import io
from collections.abc import Mapping

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord

from fedgc.compress.payloads import CodedSparsePayload, Payload
from fedgc.flower.keys import UPDATE
from fedgc.wire.codec import VERSION, VERSION_V3, CodecError, decode_bytes, encode_bytes

__all__ = ["BLOB_KEY", "MAX_COMPACT_BYTES", "UPDATE_KEY", "CodecError", "UpdateRecord", "decode_bytes",
           "decode_update", "encode_bytes", "encode_update", "update_bytes", "update_record", "wire_version"]

UPDATE_KEY = UPDATE  # keys.UPDATE: the reply's encoded update
NPY_STYPE = "numpy.ndarray"  # the Array's stype for .npy data (what Array(ndarray) sets)
BLOB_KEY = "blob"  # the one item of a compact update record
MAX_COMPACT_BYTES = 1 << 20  # a larger v3 blob travels in an ArrayRecord, which Flower chunks

UpdateRecord = ArrayRecord | ConfigRecord


def wire_version(payloads: dict[str, Payload]) -> int:
    """The blob version ``payloads`` travel in: 3 (wire format v3) when a sparse payload's values are
    in one of its encodings (``value_dtype`` int8, int4 or sign: a ``CodedSparsePayload``), else 1,
    which every client reads. Only a node that declared v3 at the census is sent one
    (``fedgc.flower.wire_versions``)."""
    return VERSION_V3 if any(isinstance(p, CodedSparsePayload) for p in payloads.values()) else VERSION


def encode_update(payloads: dict[str, Payload]) -> UpdateRecord:
    """``payloads`` must be in the model's parameter order (as ``compress_update`` produces them); the
    blob is in ``wire_version(payloads)``, each coded payload with its own codes and scales; a v3 blob
    of at most ``MAX_COMPACT_BYTES`` in the compact form, any other in an ``ArrayRecord``."""
    version = wire_version(payloads)
    blob = encode_bytes(payloads, version=version)
    if version == VERSION_V3 and len(blob) <= MAX_COMPACT_BYTES:
        return ConfigRecord({BLOB_KEY: blob})
    # What Array(np.frombuffer(blob, dtype=np.uint8)) holds (np.save's bytes), without copying the
    # blob into an array and saving it through a stream.
    return ArrayRecord({UPDATE_KEY: Array(dtype="uint8", shape=(len(blob),), stype=NPY_STYPE,
                                          data=npy_header(len(blob)) + blob)})


def npy_header(count: int) -> bytes:
    """The .npy header that numpy's own writer (``np.save``, as ``Array(ndarray)`` calls it) puts
    before a 1-D uint8 array of ``count`` entries: format 1.0, padded to 64 bytes."""
    fields = np.lib.format.header_data_from_array_1_0(np.zeros(0, dtype=np.uint8))
    fields["shape"] = (count,)
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, fields)
    return stream.getvalue()


def update_record(content: Mapping[str, object], key: str) -> UpdateRecord | None:
    """The update record under ``key`` in a message's ``content`` (a ``RecordDict``), in either form;
    None when there is none or the record there is of another kind (a ``MetricRecord``)."""
    record = content.get(key)
    return record if isinstance(record, ArrayRecord | ConfigRecord) else None


def update_bytes(record: UpdateRecord) -> int:
    """The bytes ``record`` carries (an ``ArrayRecord``'s arrays; a compact record's values, a number
    as 8), bounded before anything in it is decoded."""
    if isinstance(record, ArrayRecord):
        return record.count_bytes()
    return sum(len(v) if isinstance(v, str | bytes) else 8 for v in record.values())


def decode_update(record: UpdateRecord, shapes: dict[str, tuple[int, ...]]) -> dict[str, Payload]:
    """Validate and decode ``record`` (either form) against the model's parameter ``shapes``; raise
    ``CodecError``."""
    if isinstance(record, ConfigRecord):
        return decode_bytes(compact_blob(record), shapes)
    keys = list(record)
    if keys != [UPDATE_KEY]:
        raise CodecError("bad-record", f"expected one array {UPDATE_KEY!r}, got {keys[:4]}")
    array = record[UPDATE_KEY]
    if array.dtype != "uint8" or len(array.shape) != 1:
        raise CodecError("bad-dtype", f"update array is {array.dtype} {array.shape}, expected 1-D uint8")
    return decode_bytes(npy_bytes(array), shapes)


def compact_blob(record: ConfigRecord) -> bytes:
    """The blob of a compact update record: exactly one item, ``BLOB_KEY``, a bytes value of at most
    ``MAX_COMPACT_BYTES``; else ``bad-record``."""
    keys = list(record)
    if keys != [BLOB_KEY]:
        raise CodecError("bad-record", f"expected one bytes value {BLOB_KEY!r}, got keys {keys[:4]}")
    blob = record[BLOB_KEY]
    if type(blob) is not bytes:
        raise CodecError("bad-record", f"{BLOB_KEY!r} is {type(blob).__name__}, expected bytes")
    if len(blob) > MAX_COMPACT_BYTES:
        raise CodecError("bad-record", f"a compact update of {len(blob)} bytes > {MAX_COMPACT_BYTES}")
    return blob


def npy_bytes(array: Array) -> np.ndarray:
    """The blob inside ``array``: ``stype`` "numpy.ndarray" and ``data`` one .npy file (as numpy reads
    it, no pickles) holding a uint8 array of the Array's own shape, nothing after it; else ``bad-array``."""
    if array.stype != NPY_STYPE:
        raise CodecError("bad-array", f"stype {array.stype!r}, expected 'numpy.ndarray'")
    shape, data = array.shape, array.data
    if (len(shape) == 1 and type(shape[0]) is int and shape[0] >= 0 and type(data) is bytes
            and 0 < len(data) - shape[0] <= 4096):
        # The usual case, numpy's own header for this shape and exactly the entries after it: what
        # read_array below would return, without parsing the header's Python literal. (The length
        # test first: no header is written for a shape the data cannot hold.)
        header = npy_header(shape[0])
        if len(data) == len(header) + shape[0] and data.startswith(header):
            return np.frombuffer(data, dtype=np.uint8, offset=len(header))
    stream = io.BytesIO(array.data)
    try:  # numpy's own .npy reader (versions 1.0, 2.0, 3.0); not np.load, which would also try zip
        loaded = np.lib.format.read_array(stream, allow_pickle=False)
    except (ValueError, TypeError, EOFError, OSError, SyntaxError) as err:
        raise CodecError("bad-array", f"not a .npy file: {err}") from None
    if not isinstance(loaded, np.ndarray) or loaded.dtype != np.uint8 or loaded.shape != tuple(array.shape):
        raise CodecError("bad-array", f".npy holds {getattr(loaded, 'dtype', type(loaded).__name__)} "
                                      f"{getattr(loaded, 'shape', '')}, the Array says uint8 {tuple(array.shape)}")
    if stream.tell() != len(array.data):
        raise CodecError("bad-array", f"{len(array.data) - stream.tell()} bytes after the .npy array")
    return loaded
