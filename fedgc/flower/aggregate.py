"""Weighted aggregation of decoded client updates, per payload type.

Sparse payloads are scatter-added; dense ones added. The result is the weighted mean of the
clients' updates as dense fp32 tensors, in the model's shapes.
"""

from __future__ import annotations

import numpy as np
import torch

from fedgc.compress.base import DensePayload, Payload, SparsePayload


def aggregate_payloads(updates: list[tuple[float, dict[str, Payload]]],
                       shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """``updates``: (weight, payloads) per client, weights summing to 1."""
    total = {name: torch.zeros(int(np.prod(shape)), dtype=torch.float32) for name, shape in shapes.items()}
    for weight, payloads in updates:
        for name, payload in payloads.items():
            if isinstance(payload, SparsePayload):
                total[name].index_add_(0, payload.indices, payload.values.to(torch.float32) * weight)
            elif isinstance(payload, DensePayload):
                total[name].add_(payload.values.to(torch.float32).flatten() * weight)  # same arithmetic as sparse
            else:
                raise TypeError(f"cannot aggregate {type(payload).__name__}")
    return {name: total[name].reshape(shape) for name, shape in shapes.items()}
