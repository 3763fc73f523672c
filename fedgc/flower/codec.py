"""The wire format of a compressed update inside Flower records (see docs/wire-format.md).

An update is one ``ArrayRecord``. For a parameter ``p``:
  dense:  ``p``            → its values (fp32 or fp16), flattened
  sparse: ``p#indices``    → uint8 index block (``varint.encode_indices``)
          ``p#values``     → the selected values (fp32 or fp16)
Shapes are not sent: the server knows the model. Decoding validates everything against it.
"""

from __future__ import annotations

import numpy as np
import torch
from flwr.app import Array, ArrayRecord

from fedgc.compress.base import DensePayload, Payload, SparsePayload
from fedgc.flower.varint import IndexCodingError, decode_indices, encode_indices

INDICES, VALUES = "#indices", "#values"
VALUE_DTYPES = {"float32": torch.float32, "float16": torch.float16}


class CodecError(ValueError):
    """An update that cannot be decoded; ``reason`` is a short machine-readable tag."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def encode_update(payloads: dict[str, Payload]) -> ArrayRecord:
    record = ArrayRecord()
    for name, payload in payloads.items():
        if isinstance(payload, DensePayload):
            record[name] = Array(payload.values.detach().flatten().numpy())
        elif isinstance(payload, SparsePayload):
            numel = payload.numel
            record[name + INDICES] = Array(encode_indices(payload.indices.numpy(), numel))
            record[name + VALUES] = Array(payload.values.detach().numpy())
        else:
            raise TypeError(f"no wire format for {type(payload).__name__}")
    return record


def _values(array: Array, name: str, expected: int | None) -> torch.Tensor:
    if array.dtype not in VALUE_DTYPES:
        raise CodecError("bad-dtype", f"{name} has dtype {array.dtype}")
    try:
        values = torch.from_numpy(array.numpy().copy()).flatten()
    except (ValueError, TypeError) as err:
        raise CodecError("bad-array", f"{name}: {err}") from None
    if expected is not None and values.numel() != expected:
        raise CodecError("bad-length", f"{name} has {values.numel()} values, expected {expected}")
    if not torch.isfinite(values).all():
        raise CodecError("non-finite", f"{name} holds NaN or Inf")
    return values


def decode_update(record: ArrayRecord, shapes: dict[str, tuple[int, ...]]) -> dict[str, Payload]:
    """Validate and decode ``record`` against the model's parameter ``shapes``; raise ``CodecError``."""
    payloads: dict[str, Payload] = {}
    for key in record:
        base = key.removesuffix(INDICES).removesuffix(VALUES)
        if base not in shapes:
            raise CodecError("unknown-parameter", f"{key!r} is not a model parameter")
    for name, shape in shapes.items():
        numel = int(np.prod(shape))
        if name in record:
            if name + INDICES in record or name + VALUES in record:
                raise CodecError("ambiguous", f"{name} sent both dense and sparse")
            payloads[name] = DensePayload(values=_values(record[name], name, numel), shape=shape)
        elif name + INDICES in record and name + VALUES in record:
            block = record[name + INDICES]
            if block.dtype != "uint8":
                raise CodecError("bad-dtype", f"{name}{INDICES} has dtype {block.dtype}")
            try:
                indices = decode_indices(block.numpy(), numel)
            except (IndexCodingError, ValueError) as err:
                raise CodecError("bad-indices", f"{name}: {err}") from None
            values = _values(record[name + VALUES], name, indices.size)
            payloads[name] = SparsePayload(indices=torch.from_numpy(indices), values=values, shape=shape)
        elif name + INDICES in record or name + VALUES in record:
            raise CodecError("bad-length", f"{name}: indices without values or values without indices")
        else:
            raise CodecError("missing-parameter", f"{name} is missing from the update")
    return payloads
