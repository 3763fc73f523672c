"""In-memory federated datasets: numpy arrays per client plus a central test split."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


class DataFileError(ValueError):
    """A data file or data source is missing, unreachable or not in the expected format (one-line message)."""


@dataclass
class ArrayDataset:
    x: np.ndarray  # features, shape (n, *input_shape): float32 (images, vectors) or int64 (token sequences)
    y: np.ndarray  # int64 labels, shape (n,)

    def __len__(self) -> int:
        return int(self.y.shape[0])

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
