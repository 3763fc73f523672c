"""Partitions of a train split into client datasets, deterministic for a seed.

Each returns a list of index arrays, disjoint, covering the split (tests check both).
"""

from __future__ import annotations

import numpy as np


def iid(labels: np.ndarray, num_clients: int, rng: np.random.Generator, **_: float) -> list[np.ndarray]:
    return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), num_clients)]


def dirichlet(labels: np.ndarray, num_clients: int, rng: np.random.Generator, alpha: float = 0.5,
              min_size: int = 1, **_: float) -> list[np.ndarray]:
    """Label skew: each class is split among clients by proportions drawn from Dir(alpha).

    Redraws (up to 100 times) until every client has at least ``min_size`` samples.
    """
    classes = np.unique(labels)
    for _attempt in range(100):
        parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            proportions = rng.dirichlet(np.full(num_clients, alpha))
            cuts = (np.cumsum(proportions)[:-1] * len(idx)).astype(int)
            for client, chunk in enumerate(np.split(idx, cuts)):
                parts[client].append(chunk)
        result = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(p) for p in result) >= min_size:
            return result
    raise ValueError(f"data.partition dirichlet: alpha={alpha} leaves a client with < {min_size} samples; "
                     "raise alpha or lower num_clients")


PARTITIONERS = {"iid": iid, "dirichlet": dirichlet}
