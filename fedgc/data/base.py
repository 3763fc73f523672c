"""In-memory federated datasets: numpy arrays per client plus a central test split."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedgc.errors import FedgcError


class DataFileError(FedgcError, ValueError):
    """A data file or data source is missing, unreachable or not in the expected format (one-line message)."""


@dataclass
class ArrayDataset:
    x: np.ndarray  # features, shape (n, *input_shape): float32 (images, vectors) or int64 (token sequences)
    y: np.ndarray  # int64 labels, shape (n,)
    # Copies of (x, y) on other devices than the CPU, made by ``tensors`` (not part of the data).
    _copies: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict, init=False, repr=False,
                                                                  compare=False)

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def tensors(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) as tensors on ``device``. On the CPU they share the arrays' memory; on a GPU they
        are copied there the first time and kept, so a partition crosses the bus once per process,
        not every round it trains (the arrays never change)."""
        if device.type == "cpu":
            return torch.from_numpy(self.x), torch.from_numpy(self.y)
        key = str(device)
        if key not in self._copies:
            self._copies[key] = (torch.from_numpy(self.x).to(device), torch.from_numpy(self.y).to(device))
        return self._copies[key]

    def __getstate__(self) -> dict[str, Any]:
        return {"x": self.x, "y": self.y}  # a copy sent to another process carries no device tensors

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.x, self.y, self._copies = state["x"], state["y"], {}

    def subset(self, indices: np.ndarray) -> ArrayDataset:
        return ArrayDataset(self.x[indices], self.y[indices])


@dataclass
class CentralDataset:
    """A dataset before partitioning: a train split to partition and a held-out test split.

    ``train_groups`` gives, for naturally partitioned data (LEAF users, synthetic devices, a Hugging Face
    column such as FEMNIST's writer id), the integer group of each train sample; ``group_names`` names
    the groups (``group_names[g]``). Both are ``None`` when the data has no natural clients.
    """

    train: ArrayDataset
    test: ArrayDataset
    num_classes: int
    input_shape: tuple[int, ...]
    train_groups: np.ndarray | None = None
    group_names: list[str] | None = None


@dataclass
class FederatedData:
    partitions: list[ArrayDataset]
    test: ArrayDataset
    num_classes: int
    input_shape: tuple[int, ...]
    client_names: list[str] = field(default_factory=list)  # natural partition: the user/device of each client


def resolve_root(root: str | None, dataset: str, default_dir: str, what: str) -> Path:
    """``data.root`` if set, else ``$FEDGC_DATA_DIR/<default_dir>``; a one-line DataFileError if neither."""
    if root:
        return Path(root).expanduser()
    base = os.environ.get("FEDGC_DATA_DIR")
    if base:
        return Path(base).expanduser() / default_dir
    raise DataFileError(f"data.root: required for dataset {dataset!r} ({what}); "
                        f"or set FEDGC_DATA_DIR to a folder holding {default_dir}/")
