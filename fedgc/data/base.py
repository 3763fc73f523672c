"""In-memory federated datasets: numpy arrays per client plus a central test split."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ArrayDataset:
    x: np.ndarray  # float32 features, shape (n, *input_shape)
    y: np.ndarray  # int64 labels, shape (n,)

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def subset(self, indices: np.ndarray) -> ArrayDataset:
        return ArrayDataset(self.x[indices], self.y[indices])


@dataclass
class CentralDataset:
    """A dataset before partitioning: a train split to partition and a held-out test split."""

    train: ArrayDataset
    test: ArrayDataset
    num_classes: int
    input_shape: tuple[int, ...]


@dataclass
class FederatedData:
    partitions: list[ArrayDataset]
    test: ArrayDataset
    num_classes: int
    input_shape: tuple[int, ...]
