"""Datasets and partitions (no Flower imports here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset, FederatedData
from fedgc.data.digits import load_digits_dataset
from fedgc.data.mnist import DataFileError, load_mnist_dir
from fedgc.data.partition import PARTITIONERS

if TYPE_CHECKING:
    from fedgc.data.config import DataConfig


def _digits(config: DataConfig, seed: int) -> CentralDataset:
    return load_digits_dataset(seed)


def _mnist(config: DataConfig, seed: int) -> CentralDataset:
    if not config.root:
        raise DataFileError("data.root: required for dataset 'mnist' (a directory with the four IDX .gz files)")
    return load_mnist_dir(config.root)


DATASETS: dict[str, Callable[[DataConfig, int], CentralDataset]] = {"digits": _digits, "mnist": _mnist}


def load_federated(config: DataConfig, seed: int) -> FederatedData:
    """Load the dataset named in ``config`` and partition its train split among the clients."""
    central = DATASETS[config.dataset](config, seed)
    train, test = central.train, central.test
    if config.max_train_samples:
        train = train.subset(np.arange(min(len(train), config.max_train_samples)))
    if config.max_test_samples:
        test = test.subset(np.arange(min(len(test), config.max_test_samples)))
    rng = np.random.default_rng(seed)
    parts = PARTITIONERS[config.partition](train.y, config.num_clients, rng, alpha=config.alpha)
    return FederatedData([train.subset(p) for p in parts], test, central.num_classes, central.input_shape)


__all__ = ["ArrayDataset", "CentralDataset", "DATASETS", "DataFileError", "FederatedData", "load_federated"]
