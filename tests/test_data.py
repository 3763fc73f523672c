"""Specifications of fedgc.data: loaders, partitions, offline/online behaviour."""

from __future__ import annotations

import ast
import gzip
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from fedgc.data import DATASETS, PARTITIONERS, DataFileError, load_central, load_federated
from fedgc.data.config import DataConfig
from fedgc.data.leaf import ALL_LETTERS, load_leaf_dir
from fedgc.data.mnist import load_mnist_dir
from fedgc.data.partition import PartitionError, partition_options

from .conftest import get_shared, modules_imported_by

SHARED = Path(os.environ.get("FEDGC_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
MNIST = SHARED / "data" / "mnist"
SHAKESPEARE = SHARED / "data" / "leaf-shakespeare"
needs_mnist = pytest.mark.skipif(not (MNIST / "train-images-idx3-ubyte.gz").is_file(), reason=get_shared(MNIST, "mnist"))
needs_shakespeare = pytest.mark.skipif(not (SHAKESPEARE / "train").is_dir(),
                                       reason=get_shared(SHAKESPEARE, "shakespeare"))


def balanced_labels(classes: int = 10, per_class: int = 200) -> np.ndarray:
    return np.repeat(np.arange(classes), per_class)


def run(name: str, labels: np.ndarray, num_clients: int, seed: int, groups=None, **keys) -> list[np.ndarray]:
    config = DataConfig(partition=name, num_clients=num_clients, **keys)
    return PARTITIONERS[name](labels, num_clients, np.random.default_rng(seed), groups=groups,
                              **partition_options(name, config))


def label_entropy(labels: np.ndarray, parts: list[np.ndarray]) -> float:
    values = []
    for part in parts:
        counts = np.bincount(labels[part])
        p = counts[counts > 0] / counts.sum()
        values.append(float(-(p * np.log(p)).sum()))
    return float(np.mean(values))


def client_entropy(partitions) -> float:
    labels = np.concatenate([p.y for p in partitions])
    bounds = np.cumsum([len(p) for p in partitions])[:-1]
    return label_entropy(labels, np.split(np.arange(len(labels)), bounds))


# --- partitions -----------------------------------------------------------------------------------

LABEL_PARTITIONS = ["iid", "dirichlet", "shards", "pathological", "size_skew"]


@pytest.mark.parametrize("name", LABEL_PARTITIONS)
def test_partition_is_deterministic_for_a_seed(name):
    labels = np.random.default_rng(7).integers(0, 10, 1500)
    first = run(name, labels, 10, seed=3)
    again = run(name, labels, 10, seed=3)
    other = run(name, labels, 10, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert any(not np.array_equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize("name", LABEL_PARTITIONS)
def test_partition_is_disjoint_and_covers_the_split(name):
    labels = np.random.default_rng(1).integers(0, 10, 1503)
    parts = run(name, labels, 12, seed=0)
    assert len(parts) == 12
    everything = np.concatenate(parts)
    assert len(np.unique(everything)) == len(everything), "a sample is in two clients"
    assert everything.min() >= 0 and everything.max() < len(labels)
    unused = len(labels) - len(everything)
    if name == "shards":  # McMahan's equal shards: the remainder of n / (clients × shards) is left out
        assert unused == len(labels) % (12 * 2)
    else:
        assert unused == 0
    assert all(len(p) > 0 for p in parts)


def test_dirichlet_label_skew_grows_as_alpha_falls():
    labels = balanced_labels(10, 500)
    entropy = {alpha: label_entropy(labels, run("dirichlet", labels, 20, seed=0, alpha=alpha))
               for alpha in (100.0, 1.0, 0.1)}
    assert entropy[100.0] > entropy[1.0] > entropy[0.1]
    assert entropy[100.0] > 0.95 * np.log(10)


def test_dirichlet_impossible_setting_is_a_one_line_error():
    with pytest.raises(PartitionError, match=r"data.partition dirichlet") as err:
        run("dirichlet", balanced_labels(10, 10), 90, seed=0, alpha=0.01, min_partition_size=5)
    assert "\n" not in str(err.value)


def test_shards_give_at_most_two_labels_per_client():
    # 10 classes × 200, 10 clients × 2 shards of 100: no shard straddles a class boundary.
    labels = np.random.default_rng(0).permutation(balanced_labels(10, 200))
    parts = run("shards", labels, 10, seed=0)
    assert all(len(np.unique(labels[p])) <= 2 for p in parts)
    assert all(len(p) == 200 for p in parts)


def test_pathological_gives_exactly_the_requested_labels_per_client():
    labels = np.random.default_rng(2).integers(0, 10, 2000)  # unbalanced classes
    parts = run("pathological", labels, 20, seed=0, classes_per_client=2)
    assert all(len(np.unique(labels[p])) == 2 for p in parts)


def test_size_skew_sizes_follow_sigma():
    labels = balanced_labels(10, 300)
    equal = [len(p) for p in run("size_skew", labels, 10, seed=0, size_sigma=0.0)]
    skewed = [len(p) for p in run("size_skew", labels, 10, seed=0, size_sigma=2.0, min_partition_size=5)]
    assert max(equal) - min(equal) <= 1
    assert max(skewed) > 5 * min(skewed) and min(skewed) >= 5


def test_natural_partition_keeps_groups_together():
    groups = np.repeat(np.arange(6), [5, 9, 3, 7, 2, 4])
    labels = np.arange(len(groups)) % 3
    parts = run("natural", labels, 6, seed=0, groups=groups)
    assert [groups[p].tolist() for p in parts] == [[g] * n for g, n in enumerate([5, 9, 3, 7, 2, 4])]
    some = run("natural", labels, 3, seed=0, groups=groups)
    assert all(len(np.unique(groups[p])) == 1 for p in some)
    assert len({int(groups[p[0]]) for p in some}) == 3
    with pytest.raises(PartitionError, match="natural clients"):
        run("natural", labels, 7, seed=0, groups=groups)
    with pytest.raises(PartitionError, match="no natural clients"):
        run("natural", labels, 3, seed=0)


def test_load_federated_digits_default_is_offline_and_deterministic():
    config = DataConfig(partition="dirichlet", num_clients=8, alpha=0.3)
    a, b = load_federated(config, 5), load_federated(config, 5)
    assert a.input_shape == (1, 8, 8) and a.num_classes == 10
    assert sum(len(p) for p in a.partitions) + len(a.test) == 1797
    assert all(np.array_equal(p.y, q.y) and np.array_equal(p.x, q.x) for p, q in zip(a.partitions, b.partitions))


@pytest.mark.parametrize("size, clients", [(1797, 10), (1437, 7), (100, 100), (1503, 12), (5, 2)])
def test_iid_takes_the_shards_flwr_datasets_iid_partitioner_takes(size, clients):
    """fedgc cuts the shuffled rows itself (fedgc/data/partition/iid.py); flwr-datasets' IidPartitioner on
    a ``datasets.Dataset`` of the same rows gives the same clients, for the same generator state."""
    from flwr_datasets.partitioner import IidPartitioner

    from fedgc.data.partition.base import run_partitioner

    labels = np.random.default_rng(size).integers(0, 10, size)
    ours = run("iid", labels, clients, seed=11)
    rows = np.random.default_rng(11).permutation(size)
    theirs = run_partitioner(IidPartitioner(clients), {"label": labels}, rows, "iid")
    assert len(ours) == len(theirs) == clients
    assert all(a.dtype == np.int64 and np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_the_digits_are_scikit_learns():
    from sklearn.datasets import load_digits

    from fedgc.data.digits import digits_arrays

    bunch = load_digits()
    images, target = digits_arrays()
    assert images.dtype == bunch.images.dtype and np.array_equal(images, bunch.images)
    assert target.dtype == bunch.target.dtype and np.array_equal(target, bunch.target)


def test_a_digits_iid_split_imports_neither_scikit_learn_nor_hf_datasets():
    """Every process that builds a run's data pays for what it imports: a Flower ClientApp is a new
    process per message. The digits (the file fedgc ships) split IID need neither
    scikit-learn nor HF datasets and flwr-datasets (together about 2 s of CPU)."""
    code = ("from fedgc.data import load_federated\n"
            "from fedgc.data.config import DataConfig\n"
            "data = load_federated(DataConfig(dataset='digits', partition='iid', num_clients=4), 0)\n"
            "assert sum(len(p) for p in data.partitions) + len(data.test) == 1797\n")
    assert modules_imported_by(code, ("sklearn", "datasets", "flwr_datasets", "pyarrow")) == []


# --- config ---------------------------------------------------------------------------------------

def test_config_rejects_unknown_keys_and_names():
    with pytest.raises(ValidationError):
        DataConfig(datset="mnist")
    with pytest.raises(ValidationError, match="unknown dataset"):
        DataConfig(dataset="cifar")
    with pytest.raises(ValidationError, match="unknown partition"):
        DataConfig(partition="by_label")
    with pytest.raises(ValidationError):
        DataConfig(synthetic={"gamma": 1})
    assert DataConfig(dataset="hf:uoft-cs/cifar10").dataset == "hf:uoft-cs/cifar10"
    assert {"digits", "mnist", "fashion_mnist", "shakespeare", "femnist", "synthetic"} <= set(DATASETS)


# --- MNIST-format IDX -----------------------------------------------------------------------------

def write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def tiny_mnist(root: Path) -> Path:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    write_idx(root / "train-images-idx3-ubyte.gz", rng.integers(0, 256, (20, 28, 28)))
    write_idx(root / "train-labels-idx1-ubyte.gz", np.arange(20) % 10)
    write_idx(root / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (6, 28, 28)))
    write_idx(root / "t10k-labels-idx1-ubyte.gz", np.arange(6) % 10)
    return root


@needs_mnist
def test_mnist_loader_reads_the_shared_files():
    central = load_mnist_dir(MNIST)
    assert central.train.x.shape == (60000, 1, 28, 28) and central.test.x.shape == (10000, 1, 28, 28)
    assert central.train.x.dtype == np.float32 and central.train.y.dtype == np.int64
    assert np.bincount(central.train.y).tolist()[:3] == [5923, 6742, 5958]
    assert central.num_classes == 10 and central.input_shape == (1, 28, 28)


@pytest.mark.slow
@needs_mnist
def test_mnist_mcmahan_shards_on_real_data():
    data = load_federated(DataConfig(dataset="mnist", root=str(MNIST), num_clients=100, partition="shards"), 0)
    assert [len(p) for p in data.partitions] == [600] * 100
    labels_per_client = [len(np.unique(p.y)) for p in data.partitions]
    assert np.mean(labels_per_client) <= 2.2 and max(labels_per_client) <= 4


def test_fashion_mnist_uses_the_same_loader(tmp_path):
    data = load_federated(DataConfig(dataset="fashion_mnist", root=str(tiny_mnist(tmp_path)), num_clients=4), 0)
    assert sum(len(p) for p in data.partitions) == 20 and len(data.test) == 6


def test_fedgc_data_dir_env_names_the_root(tmp_path, monkeypatch):
    tiny_mnist(tmp_path / "mnist")
    monkeypatch.setenv("FEDGC_DATA_DIR", str(tmp_path))
    assert len(load_central(DataConfig(dataset="mnist"), 0).train) == 20
    monkeypatch.delenv("FEDGC_DATA_DIR")
    with pytest.raises(DataFileError, match=r"data.root"):
        load_central(DataConfig(dataset="mnist"), 0)


def test_corrupted_idx_file_is_a_one_line_error(tmp_path):
    root = tiny_mnist(tmp_path)
    path = root / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:40])  # truncated gzip
    with pytest.raises(DataFileError) as err:
        load_mnist_dir(root)
    assert "train-images-idx3-ubyte.gz" in str(err.value) and "\n" not in str(err.value)
    path.write_bytes(gzip.compress(bytes([0, 0, 8, 3, 0, 0, 0, 20]) + b"\x00" * 50))  # header lies about size
    with pytest.raises(DataFileError, match="header") as err:
        load_mnist_dir(root)
    assert "\n" not in str(err.value)


def test_missing_idx_file_is_a_one_line_error(tmp_path):
    root = tiny_mnist(tmp_path)
    (root / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataFileError, match=r"missing t10k-labels-idx1-ubyte.gz") as err:
        load_federated(DataConfig(dataset="mnist", root=str(root)), 0)
    assert "\n" not in str(err.value)


# --- LEAF -----------------------------------------------------------------------------------------

@needs_shakespeare
def test_leaf_shakespeare_keeps_each_users_data_together():
    doc = json.loads(next((SHAKESPEARE / "train").glob("*.json")).read_text())
    data = load_federated(DataConfig(dataset="shakespeare", root=str(SHAKESPEARE), partition="natural",
                                     num_clients=len(doc["users"])), 0)
    assert data.client_names == doc["users"]
    assert [len(p) for p in data.partitions] == doc["num_samples"]
    assert data.input_shape == (80,) and data.num_classes == len(ALL_LETTERS) == 80
    for name, part in zip(doc["users"], data.partitions):
        record = doc["user_data"][name]
        texts = {"".join(ALL_LETTERS[i] for i in row) for row in part.x}
        assert texts == set(record["x"])
        assert sorted(ALL_LETTERS[i] for i in part.y) == sorted(record["y"])
    assert data.partitions[0].x.dtype == np.int64 and data.test.x.shape[1:] == (80,)
    assert len(data.test) == 3881  # the test lists; their num_samples fields say 4,671 (see fedgc.data.leaf)


def write_leaf(root: Path, split: str, users: dict[str, tuple[list, list]], counts=None) -> None:
    (root / split).mkdir(parents=True, exist_ok=True)
    doc = {"users": list(users), "num_samples": counts or [len(v[1]) for v in users.values()],
           "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()}}
    (root / split / "data.json").write_text(json.dumps(doc))


def test_leaf_femnist_images_and_users(tmp_path):
    rng = np.random.default_rng(0)

    def user(n):
        return rng.random((n, 784)).round(3).tolist(), rng.integers(0, 62, n).tolist()

    write_leaf(tmp_path, "train", {"f0": user(3), "f1": user(5), "f2": user(2)})
    write_leaf(tmp_path, "test", {"f0": user(1), "f1": user(1), "f2": user(1)})
    central = load_leaf_dir(tmp_path, "femnist")
    assert central.train.x.shape == (10, 1, 28, 28) and central.num_classes == 62
    assert central.train_groups.tolist() == [0] * 3 + [1] * 5 + [2] * 2
    data = load_federated(DataConfig(dataset="femnist", root=str(tmp_path), partition="natural", num_clients=3), 0)
    assert [len(p) for p in data.partitions] == [3, 5, 2] and data.client_names == ["f0", "f1", "f2"]


def test_leaf_bad_files_are_one_line_errors(tmp_path):
    write_leaf(tmp_path, "train", {"u": (["a" * 80], ["b"])})
    (tmp_path / "test").mkdir()
    with pytest.raises(DataFileError, match="no LEAF"):
        load_leaf_dir(tmp_path, "shakespeare")
    write_leaf(tmp_path, "test", {"u": (["a" * 79 + "\u00e9"], ["b"])})
    with pytest.raises(DataFileError, match="vocabulary") as err:
        load_leaf_dir(tmp_path, "shakespeare")
    assert "\n" not in str(err.value)
    (tmp_path / "test" / "data.json").write_text("{not json")
    with pytest.raises(DataFileError, match="not readable LEAF JSON"):
        load_leaf_dir(tmp_path, "shakespeare")
    write_leaf(tmp_path, "test", {"u": (["a" * 80, "b" * 80], ["b"])})
    with pytest.raises(DataFileError, match="2 x but 1 y"):
        load_leaf_dir(tmp_path, "shakespeare")


# --- synthetic ------------------------------------------------------------------------------------

def test_fedprox_synthetic_is_seeded_and_naturally_partitioned():
    config = DataConfig(dataset="synthetic", num_clients=30, partition="natural", synthetic={"alpha": 1, "beta": 1})
    a, b = load_federated(config, 0), load_federated(config, 0)
    assert len(a.partitions) == 30 and a.input_shape == (60,) and a.num_classes == 10
    assert all(len(p) >= 45 for p in a.partitions)  # ≥ 50 samples per device, 90 % of them train
    assert all(np.array_equal(p.x, q.x) for p, q in zip(a.partitions, b.partitions))
    assert not np.array_equal(load_federated(config, 1).partitions[0].x[:5], a.partitions[0].x[:5])
    # Heterogeneous devices: each device's labels are far less spread than under iid=true.
    iid = load_federated(config.model_copy(update={"synthetic": config.synthetic.model_copy(update={"iid": True})}), 0)
    assert client_entropy(iid.partitions) > client_entropy(a.partitions)


# --- Hugging Face (online) ------------------------------------------------------------------------

@pytest.mark.parametrize("endpoint, timeout_s", [("http://127.0.0.1:9", 2.0), ("https://10.255.255.1", 0.5)])
def test_hf_dataset_without_network_fails_fast_and_clearly(monkeypatch, endpoint, timeout_s):
    monkeypatch.setenv("HF_ENDPOINT", endpoint)  # refused / black-holed: no network, whatever the machine has
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    config = DataConfig(dataset="hf:ylecun/mnist", huggingface={"timeout_s": timeout_s})
    start = time.monotonic()
    with pytest.raises(DataFileError, match=r"hf:ylecun/mnist: cannot reach .*no network") as err:
        load_federated(config, 0)
    assert time.monotonic() - start < timeout_s + 2.0
    assert "\n" not in str(err.value) and "HF_HUB_OFFLINE" in str(err.value)


# --- layering -------------------------------------------------------------------------------------

def test_data_imports_no_flower_except_flwr_datasets():
    root = Path(__file__).resolve().parents[1] / "fedgc" / "data"
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "flwr" or n.startswith("flwr.") for n in names), f"{path} imports {names}"


@needs_mnist
def test_shared_data_is_not_written(tmp_path):
    copy = tmp_path / "m"
    shutil.copytree(MNIST, copy)
    load_mnist_dir(copy)
    assert sorted(p.name for p in copy.iterdir()) == sorted(p.name for p in MNIST.iterdir())


def test_each_partitioner_takes_its_own_options_and_every_option_has_a_partitioner():
    from fedgc.data.partition import option_names

    options = {name: set(option_names(name)) for name in PARTITIONERS}
    assert options["dirichlet"] == {"alpha", "min_partition_size"} and options["iid"] == set()
    assert options["shards"] == {"shards_per_client"} and options["size_skew"] == {"size_sigma", "min_partition_size"}
    partition_keys = {"alpha", "shards_per_client", "classes_per_client", "size_sigma", "min_partition_size"}
    assert set().union(*options.values()) == partition_keys and partition_keys <= set(DataConfig.model_fields)
