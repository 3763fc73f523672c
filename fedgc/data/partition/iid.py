"""IID: a seeded shuffle cut into equal contiguous shards (sizes differ by ≤ 1).

That is what flwr-datasets' ``IidPartitioner`` takes from the shuffled rows (``Dataset.shard`` with
``contiguous=True``); it is computed here without building a ``datasets.Dataset``, whose import costs
every process that partitions (a Flower ClientApp, a ServerApp, a run) about 1.6 s of CPU.
``tests/test_data.py`` holds the two equal.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.partition.base import check_clients


def iid(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *,
        groups: np.ndarray | None = None) -> list[np.ndarray]:
    check_clients(num_clients, len(labels), "iid")
    rows = rng.permutation(len(labels))  # IidPartitioner has no seed: its rows come shuffled
    return [np.sort(shard).astype(np.int64, copy=False) for shard in np.array_split(rows, num_clients)]
