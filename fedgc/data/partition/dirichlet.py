"""Label skew by Dirichlet(α): flwr-datasets' ``DirichletPartitioner``, then a guaranteed minimum.

Each class is divided among the clients by proportions drawn from Dir(α·1) (class-wise, as in
flwr-datasets; smaller α, more skew). Like flwr-datasets it redraws (up to 11 draws) until every
client has ``min_partition_size`` samples. Where no draw meets the minimum (10,000 MNIST clients at
α = 0.5: about 0.5 % of the clients get no sample in every draw), the last draw is **topped up**
instead of refused: each client below the minimum takes the samples it lacks from clients above it,
so every client ends with at least ``min_partition_size`` samples and every sample is used once.

Top-up: each client above the minimum keeps ``min_partition_size`` of its samples (chosen at random)
and offers the rest; a client short of ``k`` samples draws ``k`` times a class with probability ∝ its
own Dirichlet proportion of that class (among the classes still offered; uniform over the offered
samples if it has no weight on any of them) and takes a random offered sample of that class. The
only refusal left is ``num_clients × min_partition_size`` > the train samples.

The draws are flwr-datasets 0.6's, computed here with NumPy (same seed, same
``Generator.dirichlet`` calls, same cuts; ``tests/test_partition_scale.py`` checks them against
``DirichletPartitioner`` itself) because its per-partition Python loops take ~3 s per draw at 10,000
clients. A partition that flwr-datasets made before is therefore unchanged.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.partition.base import PartitionError, check_clients, draw_seed

MAX_DRAWS = 11  # flwr-datasets' DirichletPartitioner: the first draw and 10 retries


def dirichlet(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, alpha: float,
              min_partition_size: int, groups: np.ndarray | None = None) -> list[np.ndarray]:
    check_clients(num_clients, len(labels), "dirichlet")
    if num_clients * min_partition_size > len(labels):
        raise PartitionError(f"data.partition dirichlet: {num_clients:,} clients × min_partition_size "
                             f"{min_partition_size} exceeds the {len(labels):,} train samples; "
                             "lower data.num_clients or data.min_partition_size")
    seed = draw_seed(rng)  # the same draws, in the same order, as before: seed, then row order
    rows = rng.permutation(len(labels))
    owner, proportions = class_wise_draws(np.asarray(labels)[rows], num_clients, alpha, min_partition_size, seed)
    sizes = np.bincount(owner, minlength=num_clients)
    if sizes.min() < min_partition_size:
        owner = top_up(owner, sizes, np.asarray(labels)[rows], proportions, min_partition_size, rng)
    return split_by_owner(rows, owner, num_clients)


def class_wise_draws(targets: np.ndarray, num_clients: int, alpha: float, minimum: int,
                     seed: int) -> tuple[np.ndarray, np.ndarray]:
    """flwr-datasets' draws: the owner of each row (in ``targets``' order) of the first draw that
    meets ``minimum``, else of the last; and that draw's class × client proportions."""
    generator = np.random.default_rng(seed=seed)
    alphas = np.array([float(alpha)], dtype=float).repeat(num_clients)
    classes = np.unique(targets)
    members = [np.nonzero(targets == k)[0] for k in classes]
    owner = np.empty(len(targets), dtype=np.int64)
    proportions = np.empty((len(classes), num_clients))
    for _ in range(MAX_DRAWS):
        for c, rows_k in enumerate(members):
            proportions[c] = generator.dirichlet(alphas)
            cuts = (np.cumsum(proportions[c]) * len(rows_k)).astype(int)[:-1]
            bounds = np.concatenate([[0], np.clip(cuts, 0, len(rows_k)), [len(rows_k)]])
            owner[rows_k] = np.repeat(np.arange(num_clients), np.diff(bounds))
        if np.bincount(owner, minlength=num_clients).min() >= minimum:
            break
    return owner, proportions


def top_up(owner: np.ndarray, sizes: np.ndarray, targets: np.ndarray, proportions: np.ndarray, minimum: int,
           rng: np.random.Generator) -> np.ndarray:
    """Move samples from clients above ``minimum`` to those below it (see the module docstring)."""
    owner = owner.copy()
    classes, class_of = np.unique(targets, return_inverse=True)
    # Rank each client's rows in a random order; a row ranked at or past the minimum is offered.
    order = np.lexsort((rng.random(len(owner)), owner))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(len(owner), dtype=np.int64)
    rank[order] = np.arange(len(owner)) - np.repeat(starts, sizes)
    offered = np.flatnonzero(rank >= minimum)
    offered = offered[rng.permutation(len(offered))]
    pools = [list(offered[class_of[offered] == c]) for c in range(len(classes))]
    left = np.array([len(p) for p in pools], dtype=np.float64)
    short = np.flatnonzero(sizes < minimum)
    needs = minimum - sizes[short]
    uniforms = rng.random(int(needs.sum()))
    u = 0
    for client, need in zip(short.tolist(), needs.tolist(), strict=True):
        for _ in range(need):
            weights = proportions[:, client] * (left > 0)
            if not weights.sum() > 0:
                weights = left
            cumulative = np.cumsum(weights)
            c = min(int(np.searchsorted(cumulative, uniforms[u] * cumulative[-1], side="right")), len(left) - 1)
            if left[c] == 0:  # a float tie at a class boundary: the last class still offered
                c = int(np.flatnonzero(left)[-1])
            u += 1
            owner[pools[c].pop()] = client
            left[c] -= 1
    return owner


def split_by_owner(rows: np.ndarray, owner: np.ndarray, num_clients: int) -> list[np.ndarray]:
    """Client i's original indices (``rows`` of the positions it owns), sorted."""
    original = np.asarray(rows, dtype=np.int64)
    order = np.lexsort((original, owner))
    bounds = np.cumsum(np.bincount(owner, minlength=num_clients))[:-1]
    return np.split(original[order], bounds)
