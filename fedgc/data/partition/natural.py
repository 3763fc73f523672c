"""Natural partition: one client per natural group (LEAF user, synthetic device, Hugging Face id
column): flwr-datasets' ``NaturalIdPartitioner``.

Clients follow the groups' order (client i = group i of the file). With fewer clients than groups a
seeded sample of ``num_clients`` groups is used (the others' train data is left out, as LEAF's
``--u`` user sampling does); more clients than groups is an error.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.partition.base import PartitionError, run_partitioner


def natural(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *,
            groups: np.ndarray | None = None) -> list[np.ndarray]:
    from flwr_datasets.partitioner import NaturalIdPartitioner

    if groups is None:
        raise PartitionError("data.partition natural: this dataset has no natural clients "
                             "(use shakespeare, femnist, synthetic, or hf:<id> with huggingface.group_key)")
    present = np.unique(groups)
    if num_clients > len(present):
        raise PartitionError(f"data.num_clients: {num_clients} clients but the data has {len(present)} natural "
                             "clients (users)")
    chosen = np.sort(rng.choice(present, size=num_clients, replace=False)) if num_clients < len(present) else present
    rows = np.flatnonzero(np.isin(groups, chosen))
    return run_partitioner(NaturalIdPartitioner(partition_by="group"), {"label": labels, "group": groups}, rows,
                           "natural")
