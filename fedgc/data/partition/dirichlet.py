"""Label skew by Dirichlet(α) (Hsu et al. 2019): flwr-datasets' ``DirichletPartitioner``.

Each class is divided among the clients by proportions drawn from Dir(α·1); smaller α, more skew.
Redrawn (flwr-datasets allows 10 tries) until every client has ``min_partition_size`` samples.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.partition.base import check_clients, draw_seed, run_partitioner


def dirichlet(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, alpha: float,
              min_partition_size: int, groups: np.ndarray | None = None) -> list[np.ndarray]:
    from flwr_datasets.partitioner import DirichletPartitioner

    check_clients(num_clients, len(labels), "dirichlet")
    partitioner = DirichletPartitioner(num_partitions=num_clients, partition_by="label", alpha=alpha,
                                       min_partition_size=min_partition_size, self_balancing=False,
                                       shuffle=False, seed=draw_seed(rng))
    return run_partitioner(partitioner, {"label": labels}, rng.permutation(len(labels)), "dirichlet",
                           hint="raise data.alpha, lower data.num_clients or data.min_partition_size")
