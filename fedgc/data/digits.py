"""scikit-learn's handwritten digits (1,797 8×8 images, ships with scikit-learn: works offline)."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset


def load_digits_dataset(rng: np.random.Generator, test_fraction: float = 0.2) -> CentralDataset:
    """A seeded ``test_fraction`` of the images is the test split, the rest the train split."""
    images, target = digits_arrays()
    x = (images.astype(np.float32) / 16.0)[:, None, :, :]
    y = target.astype(np.int64)
    order = rng.permutation(len(y))
    n_test = round(len(y) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return CentralDataset(ArrayDataset(x[train], y[train]), ArrayDataset(x[test], y[test]), 10, (1, 8, 8))


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The images (float64, 1,797 × 8 × 8) and labels of ``sklearn.datasets.load_digits()``, read from
    the ``digits.csv.gz`` that scikit-learn ships as its own loader reads it (``np.loadtxt``), without
    importing scikit-learn (about 0.6 s of CPU for every process that loads the digits); through
    ``load_digits`` where the file is not where scikit-learn keeps it."""
    spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(locations[0], "datasets", "data", "digits.csv.gz") if locations else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        bunch = load_digits()
        return bunch.images, bunch.target
    with gzip.open(path, mode="rt", encoding="utf-8") as text:
        data = np.loadtxt(text, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
