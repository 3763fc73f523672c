"""Gradient compression (no Flower imports here). ``COMPRESSORS`` (``fedgc.compress.registry``) lists every compressor."""

from fedgc.compress.base import CompressionContext, Compressor, DensePayload, Payload, SparsePayload, decompress
from fedgc.compress.registry import COMPRESSORS, compressor_names, make_compressor

__all__ = [
    "COMPRESSORS",
    "CompressionContext",
    "Compressor",
    "DensePayload",
    "Payload",
    "SparsePayload",
    "compressor_names",
    "decompress",
    "make_compressor",
]
