"""Pathological non-IID by shards (McMahan et al. 2017): flwr-datasets' ``ShardPartitioner``.

The train split is sorted by label and cut into ``num_clients × shards_per_client`` equal shards
(MNIST, 100 clients: 200 shards of 300); each client gets ``shards_per_client`` shards at random.
As in the paper, a shard that straddles a class boundary holds two labels, so a few clients may
see 3–4 labels; when every class size is a multiple of the shard size each client sees ≤ 2.
The ``len(labels) mod (num_clients × shards_per_client)`` samples left over are not used.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.optional import require
from fedgc.data.partition.base import PartitionError, check_clients, draw_seed, run_partitioner


def shards(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, shards_per_client: int,
           groups: np.ndarray | None = None) -> list[np.ndarray]:
    require("data.partition", "shards")
    from flwr_datasets.partitioner import ShardPartitioner  # type: ignore[import-untyped]  # flwr-datasets ships no py.typed

    check_clients(num_clients, len(labels), "shards")
    if num_clients * shards_per_client > len(labels):
        raise PartitionError(f"data.shards_per_client: {num_clients} clients × {shards_per_client} shards "
                             f"exceeds the {len(labels)} train samples")
    partitioner = ShardPartitioner(num_partitions=num_clients, partition_by="label",
                                   num_shards_per_partition=shards_per_client, shuffle=False,
                                   seed=draw_seed(rng))
    # The partitioner sorts by label; shuffling the rows first randomizes which samples of a class
    # fall into which shard.
    return run_partitioner(partitioner, {"label": labels}, rng.permutation(len(labels)), "shards")
