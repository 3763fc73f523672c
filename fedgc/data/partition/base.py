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

from fedgc.errors import FedgcError

if TYPE_CHECKING:
    from flwr_datasets.partitioner import Partitioner  # type: ignore[import-untyped]  # flwr-datasets ships no py.typed

INDEX = "_fedgc_index"


class PartitionError(FedgcError, ValueError):
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
    from datasets import Dataset  # type: ignore[import-untyped]  # HF datasets ships no py.typed

    table = {key: np.asarray(value)[rows] for key, value in columns.items()}
    table[INDEX] = np.asarray(rows, dtype=np.int64)
    partitioner.dataset = Dataset.from_dict(table)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            return read_partitions(partitioner)
    except ValueError as err:
        first = (str(err).strip().splitlines() or [""])[0]
        raise PartitionError(f"data.partition {name}: {first}{'; ' + hint if hint else ''}") from None


def read_partitions(partitioner: Partitioner) -> list[np.ndarray]:
    """Every partition's original indices (sorted), without one ``load_partition`` per partition.

    flwr-datasets' ``load_partition(i)`` builds a ``Dataset.select`` per partition: about 4 ms
    each, so 10,000 clients took 40 s. Here partition 0 is loaded once (which runs the
    partitioner's lazy assignment, and the shard partitioner's sort), then each partition's rows are
    read from the partitioner's own assignment (``_partition_id_to_indices``) on the ``INDEX`` column
    as one array. Partitions 0
    and the last are checked against ``load_partition``; where they differ (a flwr-datasets that
    works differently) every partition is loaded the slow way, so the result is the same either way.
    """
    num = partitioner.num_partitions

    def slow(i: int) -> np.ndarray:
        return np.sort(np.asarray(partitioner.load_partition(i)[INDEX], dtype=np.int64))

    first = slow(0)
    index = index_column(partitioner.dataset)
    mapping = getattr(partitioner, "_partition_id_to_indices", None)
    parts: list[np.ndarray] | None = None
    if isinstance(mapping, dict) and len(mapping) == num and all(i in mapping for i in (0, num - 1)):
        parts = [np.sort(index[np.asarray(mapping[i], dtype=np.int64)]) for i in range(num)]
    if parts is None or not np.array_equal(parts[0], first) or (
            num > 1 and not np.array_equal(parts[-1], slow(num - 1))):
        return [first] + [slow(i) for i in range(1, num)]
    return parts


def index_column(dataset: Any) -> np.ndarray:
    """The ``INDEX`` column in the dataset's row order, read from its Arrow table (and, where a
    ``sort`` left an indices mapping, through it): ``dataset[INDEX]`` formats row by row (~20 s for
    450,000 rows)."""
    values = np.asarray(dataset.data.column(INDEX).to_numpy(), dtype=np.int64)
    mapping = getattr(dataset, "_indices", None)
    if mapping is not None:
        values = values[np.asarray(mapping.column(0).to_numpy(), dtype=np.int64)]
    return values


def check_clients(num_clients: int, num_samples: int, name: str) -> None:
    if num_clients > num_samples:
        raise PartitionError(f"data.partition {name}: {num_clients} clients but only {num_samples} train samples")
