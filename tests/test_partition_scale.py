"""Partitions for large populations: 10,000 MNIST clients by Dirichlet and shards, 100,000 synthetic
devices, and the fast paths that make them so, checked against flwr-datasets' own partitioners."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from fedgc.data import load_federated
from fedgc.data.config import MAX_SYNTHETIC_VALUES, DataConfig
from fedgc.data.mnist import load_mnist_dir
from fedgc.data.partition import PARTITIONERS, PartitionError
from fedgc.data.partition.base import INDEX, draw_seed, run_partitioner
from fedgc.data.partition.dirichlet import dirichlet
from fedgc.data.synthetic import generate_synthetic
from tests.conftest import get_shared, shared_dir


def flwr_dirichlet(labels, num_clients, rng, alpha, minimum):
    """The partition as fedgc made it before: flwr-datasets' DirichletPartitioner itself."""
    from flwr_datasets.partitioner import DirichletPartitioner

    partitioner = DirichletPartitioner(num_partitions=num_clients, partition_by="label", alpha=alpha,
                                       min_partition_size=minimum, self_balancing=False, shuffle=False,
                                       seed=draw_seed(rng))
    return run_partitioner(partitioner, {"label": labels}, rng.permutation(len(labels)), "dirichlet")


@pytest.fixture(scope="module")
def mnist_labels() -> np.ndarray:
    """MNIST's 60,000 train labels, read once for the module (the ``mnist_root`` fixture's files)."""
    root = shared_dir() / "data" / "mnist"
    if not (root / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(get_shared(root, "mnist"))
    return load_mnist_dir(root).train.y


def check_split(parts, n, minimum):
    everything = np.concatenate(parts)
    assert len(everything) == n and np.array_equal(np.sort(everything), np.arange(n)), "each example once"
    assert min(len(p) for p in parts) >= minimum


# --- the same partitions as flwr-datasets, faster --------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dirichlet_draws_are_flwr_datasets_draws(seed):
    labels = np.random.default_rng(seed).integers(0, 7, 700)
    compared = 0
    for num_clients in (3, 30):
        for alpha in (0.1, 1.0, 100.0):
            for minimum in (0, 5):
                try:
                    before = flwr_dirichlet(labels, num_clients, np.random.default_rng(seed), alpha, minimum)
                except PartitionError:
                    continue  # refused before; topped up now (below)
                now = dirichlet(labels, num_clients, np.random.default_rng(seed), alpha=alpha,
                                min_partition_size=minimum)
                assert all(np.array_equal(a, b) for a, b in zip(before, now, strict=True))
                compared += 1
    assert compared >= 8


@pytest.mark.parametrize("name, options", [("shards", {"shards_per_client": 2}),  # iid: tests/test_data.py
                                           ("pathological", {"classes_per_client": 2}),
                                           ("size_skew", {"size_sigma": 1.5, "min_partition_size": 2})])
def test_reading_partitions_at_once_equals_loading_each(name, options, monkeypatch):
    from fedgc.data.partition import base

    labels = np.random.default_rng(5).integers(0, 10, 1503)
    fast = PARTITIONERS[name](labels, 40, np.random.default_rng(9), **options)

    def one_by_one(partitioner):
        return [np.sort(np.asarray(partitioner.load_partition(i)[INDEX], dtype=np.int64))
                for i in range(partitioner.num_partitions)]

    monkeypatch.setattr(base, "read_partitions", one_by_one)
    slow = PARTITIONERS[name](labels, 40, np.random.default_rng(9), **options)
    assert len(fast) == len(slow) == 40
    assert all(np.array_equal(a, b) for a, b in zip(fast, slow, strict=True))


@pytest.mark.parametrize("num_clients", [5, 9])
def test_natural_equals_flwr_natural_id_partitioner(num_clients):
    from flwr_datasets.partitioner import NaturalIdPartitioner

    rng = np.random.default_rng(3)
    groups = rng.choice(np.array([4, 17, 2, 9, 30, 11, 5, 8, 21]), 400)  # interleaved, ids with gaps
    labels = rng.integers(0, 3, 400)
    now = PARTITIONERS["natural"](labels, num_clients, np.random.default_rng(1), groups=groups)
    chooser = np.random.default_rng(1)  # the rows natural() keeps, chosen as it chooses them
    present = np.unique(groups)
    chosen = np.sort(chooser.choice(present, num_clients, replace=False)) if num_clients < 9 else present
    rows = np.flatnonzero(np.isin(groups, chosen))
    before = run_partitioner(NaturalIdPartitioner(partition_by="group"), {"label": labels, "group": groups}, rows,
                             "natural")
    assert all(np.array_equal(a, b) for a, b in zip(before, now, strict=True)) and len(now) == num_clients


# --- Dirichlet: a guaranteed minimum -----------------------------------------------------------------

def test_dirichlet_tops_up_where_no_draw_meets_the_minimum():
    labels = np.random.default_rng(0).integers(0, 10, 1000)
    with pytest.raises(PartitionError, match="max number of attempts"):
        flwr_dirichlet(labels, 150, np.random.default_rng(4), 0.1, 5)
    parts = dirichlet(labels, 150, np.random.default_rng(4), alpha=0.1, min_partition_size=5)
    check_split(parts, 1000, 5)
    again = dirichlet(labels, 150, np.random.default_rng(4), alpha=0.1, min_partition_size=5)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    # Still skewed: the topped-up clients take classes they favour, not a uniform sample.
    mean_labels = np.mean([len(np.unique(labels[p])) for p in parts])
    assert mean_labels < 4.0, mean_labels


def test_dirichlet_refuses_only_a_minimum_the_samples_cannot_give():
    labels = np.random.default_rng(0).integers(0, 10, 100)
    with pytest.raises(PartitionError, match=r"^data\.partition dirichlet: 21 clients × min_partition_size 5 "
                                             r"exceeds the 100 train samples"):
        dirichlet(labels, 21, np.random.default_rng(0), alpha=0.5, min_partition_size=5)
    check_split(dirichlet(labels, 20, np.random.default_rng(0), alpha=0.01, min_partition_size=5), 100, 5)


@pytest.mark.parametrize("minimum", [1, 5])
def test_10k_mnist_clients_dirichlet_half(mnist_labels, minimum):
    labels = mnist_labels
    # flwr-datasets' DirichletPartitioner refuses this ("max number of attempts (10) was reached", after
    # ~40 s): about 0.5 % of the clients get no sample in every draw. Here the last draw is topped up.
    parts = dirichlet(labels, 10_000, np.random.default_rng(0), alpha=0.5, min_partition_size=minimum)
    assert len(parts) == 10_000
    check_split(parts, 60_000, minimum)
    again = dirichlet(labels, 10_000, np.random.default_rng(0), alpha=0.5, min_partition_size=minimum)
    other = dirichlet(labels, 10_000, np.random.default_rng(1), alpha=0.5, min_partition_size=minimum)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    assert any(not np.array_equal(a, b) for a, b in zip(parts, other, strict=True))
    assert np.mean([len(np.unique(labels[p])) for p in parts]) < 5  # label skew: 6 samples span ~4 labels


def test_10k_mnist_clients_shards(mnist_labels):
    labels = mnist_labels
    parts = PARTITIONERS["shards"](labels, 10_000, np.random.default_rng(0), shards_per_client=2)
    check_split(parts, 60_000, 6)
    assert {len(p) for p in parts} == {6}  # 2 shards of 3
    assert np.mean([len(np.unique(labels[p])) for p in parts]) <= 2.5


# --- synthetic: capped devices, up to 100,000 -------------------------------------------------------

def test_uncapped_synthetic_is_the_papers_and_a_cap_bounds_every_device():
    uncapped = generate_synthetic(30, np.random.default_rng(2))
    roomy = generate_synthetic(30, np.random.default_rng(2), max_samples=100_000)  # above every drawn size
    for a, b in [(uncapped.train.x, roomy.train.x), (uncapped.test.y, roomy.test.y),
                 (uncapped.train_groups, roomy.train_groups)]:
        assert np.array_equal(a, b)
    capped = generate_synthetic(30, np.random.default_rng(2), max_samples=20)
    sizes = np.bincount(capped.train_groups, minlength=30)
    assert sizes.max() <= 18 and sizes.min() >= 1 and len(capped.test) == 30 * 20 - sizes.sum()


def test_synthetic_bounds():
    with pytest.raises(ValidationError, match=r"at most 1,000 for dataset synthetic.*max_samples_per_device"):
        DataConfig(dataset="synthetic", num_clients=5_000)
    assert DataConfig(dataset="synthetic", num_clients=100_000, synthetic={"max_samples_per_device": 50})
    with pytest.raises(ValidationError, match="less than or equal to 100000"):
        DataConfig(dataset="synthetic", num_clients=100_001, synthetic={"max_samples_per_device": 2})
    over = MAX_SYNTHETIC_VALUES // (100_000 * 60) + 1
    with pytest.raises(ValidationError, match=r"data\.synthetic\.max_samples_per_device: 100,000 clients"):
        DataConfig(dataset="synthetic", num_clients=100_000, synthetic={"max_samples_per_device": over})
    with pytest.raises(ValidationError, match=r"data\.num_clients: Input should be less than or equal to 10000"):
        DataConfig(dataset="mnist", num_clients=10_001)


def test_synthetic_clients_are_views_of_the_generated_arrays():
    data = load_federated(DataConfig(dataset="synthetic", num_clients=200, partition="natural",
                                     synthetic={"max_samples_per_device": 10}), 0)
    assert len(data.partitions) == 200 and all(1 <= len(p) <= 9 for p in data.partitions)
    base = data.partitions[0].x.base
    assert base is not None and all(np.shares_memory(p.x, base) for p in data.partitions)
    assert data.client_names[:2] == ["device_0", "device_1"]


@pytest.mark.slow
def test_100k_synthetic_devices():
    config = DataConfig(dataset="synthetic", num_clients=100_000, partition="natural",
                        synthetic={"max_samples_per_device": 3, "dimension": 4})
    data = load_federated(config, 0)
    assert len(data.partitions) == 100_000 and {len(p) for p in data.partitions} == {2}
    assert len(data.test) == 100_000 and data.client_names[-1] == "device_99999"
