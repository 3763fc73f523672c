"""Gradient compression (no Flower imports here). ``COMPRESSORS`` (``fedgc.compress.registry``) lists every
compressor; a compressor is a ``Compressor`` subclass with an ``Options`` model derived from
``CompressorOptions`` (``fedgc.compress.base``), and ``add_compressor`` adds one at run time."""

from fedgc.compress.base import (
    CompressionContext,
    Compressor,
    CompressorOptions,
    DensePayload,
    Payload,
    SparsePayload,
    decompress,
)
from fedgc.compress.registry import COMPRESSORS, add_compressor, compressor_names, make_compressor

__all__ = [
    "COMPRESSORS",
    "CompressionContext",
    "Compressor",
    "CompressorOptions",
    "DensePayload",
    "Payload",
    "SparsePayload",
    "add_compressor",
    "compressor_names",
    "decompress",
    "make_compressor",
]
