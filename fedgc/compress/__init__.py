"""Gradient compression (no Flower imports here). Importing this package registers every compressor."""

from fedgc.compress import (  # noqa: F401  (each module registers its compressor)
    dgc,
    efsignsgd,
    fp16,
    natural,
    none,
    onebit,
    powersgd,
    qsgd,
    randomk,
    signsgd,
    signum,
    stc,
    terngrad,
    threshold,
    topk,
)
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
