"""IID: a seeded shuffle, then flwr-datasets' ``IidPartitioner`` (equal contiguous shards, sizes differ by ≤ 1)."""

from __future__ import annotations

import numpy as np

from fedgc.data.partition.base import check_clients, run_partitioner


def iid(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *,
        groups: np.ndarray | None = None) -> list[np.ndarray]:
    from flwr_datasets.partitioner import IidPartitioner

    check_clients(num_clients, len(labels), "iid")
    # IidPartitioner takes contiguous shards in row order and has no seed: the rows are shuffled first.
    return run_partitioner(IidPartitioner(num_clients), {"label": labels}, rng.permutation(len(labels)), "iid")
