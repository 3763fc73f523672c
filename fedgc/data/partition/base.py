"""Shared machinery of the partitioner wrappers.

Every partitioner is a function ``(labels, num_clients, rng, *, <its options>, groups) -> list[index
array]``:
the index arrays (int64, sorted) are disjoint subsets of ``range(len(labels))``, one per client,
deterministic for the state of ``rng``. Where flwr-datasets has the partitioner, the wrapper runs it
on a ``datasets.Dataset`` holding only the labels (and groups) plus each row's original index, and
reads the indices back; flwr-datasets' partitioners take an integer seed, drawn from ``rng``.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from flwr_datasets.partitioner import Partitioner

INDEX = "_fedgc_index"


class PartitionError(ValueError):
    """The partition cannot be made with these settings (one-line message naming the key)."""


class PartitionFn(Protocol):
    def __call__(self, labels: np.ndarray, num_clients: int, rng: np.random.Generator, *,
                 groups: np.ndarray | None = None, **options: Any) -> list[np.ndarray]: ...


def draw_seed(rng: np.random.Generator) -> int:
    """An integer seed for a flwr-datasets partitioner, drawn from the caller's generator."""
    return int(rng.integers(0, 2**32 - 1))


def run_partitioner(partitioner: Partitioner, columns: dict[str, Any], rows: np.ndarray, name: str,
                    hint: str = "") -> list[np.ndarray]:
    """Run a flwr-datasets partitioner on ``columns`` (row order ``rows``); original indices per partition.

    A ``ValueError`` from flwr-datasets becomes a one-line ``PartitionError`` (plus ``hint``).
    """
    from datasets import Dataset

    table = {key: np.asarray(value)[rows] for key, value in columns.items()}
    table[INDEX] = np.asarray(rows, dtype=np.int64)
    partitioner.dataset = Dataset.from_dict(table)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            return [np.sort(np.asarray(partitioner.load_partition(i)[INDEX], dtype=np.int64))
                    for i in range(partitioner.num_partitions)]
    except ValueError as err:
        first = (str(err).strip().splitlines() or [""])[0]
        raise PartitionError(f"data.partition {name}: {first}{'; ' + hint if hint else ''}") from None


def check_clients(num_clients: int, num_samples: int, name: str) -> None:
    if num_clients > num_samples:
        raise PartitionError(f"data.partition {name}: {num_clients} clients but only {num_samples} train samples")
