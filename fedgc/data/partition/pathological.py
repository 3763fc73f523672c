"""Each client holds exactly ``classes_per_client`` labels: flwr-datasets' ``PathologicalPartitioner``.

Client i gets label i mod C first and the rest at random (``first-deterministic``, so every label is
used when num_clients ≥ C); each label's samples are split evenly among the clients that hold it.
Unlike ``shards`` this guarantees at most ``classes_per_client`` labels per client.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.optional import require
from fedgc.data.partition.base import check_clients, draw_seed, run_partitioner


def pathological(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, classes_per_client: int,
                 groups: np.ndarray | None = None) -> list[np.ndarray]:
    require("data.partition", "pathological")
    from flwr_datasets.partitioner import PathologicalPartitioner  # type: ignore[import-untyped]  # flwr-datasets ships no py.typed

    check_clients(num_clients, len(labels), "pathological")
    partitioner = PathologicalPartitioner(num_partitions=num_clients, partition_by="label",
                                          num_classes_per_partition=classes_per_client,
                                          class_assignment_mode="first-deterministic", shuffle=False,
                                          seed=draw_seed(rng))
    return run_partitioner(partitioner, {"label": labels}, rng.permutation(len(labels)), "pathological")
