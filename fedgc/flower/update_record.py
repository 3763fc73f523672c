"""The Flower envelope of an update blob (``fedgc.wire``): one ``ArrayRecord`` holding one uint8
``Array`` under ``UPDATE_KEY``. One array rather than one per field because Flower frames every
``Array`` with ~460 bytes of headers and object ids. Checks in order: the record (``bad-record``),
the Array's dtype and shape fields (``bad-dtype``), its .npy data (``bad-array``), then the blob."""

from __future__ import annotations

import io

import numpy as np
from flwr.app import Array, ArrayRecord

from fedgc.compress.payloads import Payload
from fedgc.flower.keys import UPDATE
from fedgc.wire.codec import CodecError, decode_bytes, encode_bytes

__all__ = ["UPDATE_KEY", "CodecError", "decode_bytes", "decode_update", "encode_bytes", "encode_update"]

UPDATE_KEY = UPDATE  # keys.UPDATE: the reply's encoded update


def encode_update(payloads: dict[str, Payload]) -> ArrayRecord:
    """``payloads`` must be in the model's parameter order (as ``compress_update`` produces them)."""
    return ArrayRecord({UPDATE_KEY: Array(np.frombuffer(encode_bytes(payloads), dtype=np.uint8).copy())})


def decode_update(record: ArrayRecord, shapes: dict[str, tuple[int, ...]]) -> dict[str, Payload]:
    """Validate and decode ``record`` against the model's parameter ``shapes``; raise ``CodecError``."""
    keys = list(record)
    if keys != [UPDATE_KEY]:
        raise CodecError("bad-record", f"expected one array {UPDATE_KEY!r}, got {keys[:4]}")
    array = record[UPDATE_KEY]
    if array.dtype != "uint8" or len(array.shape) != 1:
        raise CodecError("bad-dtype", f"update array is {array.dtype} {array.shape}, expected 1-D uint8")
    return decode_bytes(npy_bytes(array), shapes)


def npy_bytes(array: Array) -> np.ndarray:
    """The blob inside ``array``: ``stype`` "numpy.ndarray" and ``data`` one .npy file (as numpy reads
    it, no pickles) holding a uint8 array of the Array's own shape, nothing after it; else ``bad-array``."""
    if array.stype != "numpy.ndarray":
        raise CodecError("bad-array", f"stype {array.stype!r}, expected 'numpy.ndarray'")
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
