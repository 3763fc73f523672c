"""The update blob codec shared by every client language (docs/wire-format.md). No Flower imports:
``fedgc.flower.update_record`` is the envelope that carries a blob in a Flower ``ArrayRecord``."""

from fedgc.wire.codec import CodecError, decode_bytes, encode_bytes

__all__ = ["CodecError", "decode_bytes", "encode_bytes"]
