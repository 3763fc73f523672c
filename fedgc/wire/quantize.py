"""Value encodings of wire format v3 (docs/wire-format.md, "Format v3"), as the codec names them: the
arithmetic lives in ``fedgc.compress.quantize``, beside the payloads, because the compressor side
quantizes too (``value_dtype`` int8, int4 or sign, the rounding kept by error feedback) and
``fedgc.compress`` imports nothing of the wire. ``quantize(values, encoding, block)`` returns exactly
what the receiver decodes."""

from fedgc.compress.quantize import (
    ENCODING_CODES,
    ENCODINGS,
    FP16_MAX,
    LEVELS,
    SCALED,
    Coded,
    block_count,
    code_bytes,
    dequantize,
    encode_values,
    quantize,
    value_bits,
)

__all__ = ["ENCODINGS", "ENCODING_CODES", "FP16_MAX", "LEVELS", "SCALED", "Coded", "block_count", "code_bytes",
           "dequantize", "encode_values", "quantize", "value_bits"]
