"""Quantity skew: client sizes ∝ lognormal(0, σ) draws, labels IID; flwr-datasets' ``SizePartitioner``.

σ = ``size_sigma`` (0 gives equal sizes; 1–2 gives the heavy-tailed sizes of real deployments, as
in LEAF and FedScale); every client gets at least ``min_partition_size`` samples and all samples are
used. The rows are shuffled with the seed first, since ``SizePartitioner`` cuts contiguous ranges.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.optional import require
from fedgc.data.partition.base import PartitionError, check_clients, run_partitioner


def skewed_sizes(total: int, num_clients: int, sigma: float, minimum: int, rng: np.random.Generator) -> list[int]:
    """Integer sizes summing to ``total``, each ≥ ``minimum``, the rest split ∝ lognormal(0, σ)."""
    spare = total - minimum * num_clients
    if spare < 0:
        raise PartitionError(f"data.min_partition_size: {num_clients} clients × {minimum} exceeds {total} samples")
    weights = rng.lognormal(0.0, sigma, num_clients)
    shares = weights / weights.sum() * spare
    sizes = np.floor(shares).astype(np.int64)
    remainder = spare - int(sizes.sum())
    sizes[np.argsort(shares - sizes, kind="stable")[::-1][:remainder]] += 1
    return [int(s) + minimum for s in sizes]


def size_skew(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, size_sigma: float,
              min_partition_size: int,
              groups: np.ndarray | None = None) -> list[np.ndarray]:
    require("data.partition", "size_skew")
    from flwr_datasets.partitioner import SizePartitioner  # type: ignore[import-untyped]  # flwr-datasets ships no py.typed

    check_clients(num_clients, len(labels), "size_skew")
    sizes = skewed_sizes(len(labels), num_clients, size_sigma, min_partition_size, rng)
    return run_partitioner(SizePartitioner(sizes), {"label": labels}, rng.permutation(len(labels)), "size_skew")
