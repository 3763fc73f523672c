"""What an executor trains and what it gives back: one ``TrainJob`` per selected client of a round."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from fedgc.data.base import ArrayDataset
from fedgc.execution.training import LocalTrainResult


@dataclass
class TrainJob:
    """One client's local training in a round, with the arguments of ``fedgc.execution.training.train_local``.

    ``generator`` is the client's stream (``torch.Generator().manual_seed(client_seed(...))``): every
    executor draws the client's batch order from it exactly as ``train_local`` does, so afterwards it
    is in the same state and can go on to seed the client's compressor (``CompressionContext``).
    ``start`` is for a client whose model differs from the others' (e.g. rebuilt from a compressed
    download); Δ is then taken from it.
    """

    data: ArrayDataset
    steps: int
    batch_size: int
    lr: float
    generator: torch.Generator
    momentum: float = 0.0
    weight_decay: float = 0.0
    grad_clip_norm: float | None = None
    start: Mapping[str, torch.Tensor] | None = None  # this client's own starting state (else the shared one)


@dataclass
class TrainResult:
    """The round update Δ = w_start − w_local (state-dict names, what ``client_app.local_update`` returns),
    the training summary ``train_local`` returns, and the client's number of examples."""

    delta: dict[str, torch.Tensor]
    train: LocalTrainResult
    num_examples: int
