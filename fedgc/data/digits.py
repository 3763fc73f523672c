"""scikit-learn's handwritten digits (1,797 8×8 images, ships with scikit-learn: works offline)."""

from __future__ import annotations

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset


def load_digits_dataset(rng: np.random.Generator, test_fraction: float = 0.2) -> CentralDataset:
    """A seeded ``test_fraction`` of the images is the test split, the rest the train split."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = bunch.target.astype(np.int64)
    order = rng.permutation(len(y))
    n_test = round(len(y) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return CentralDataset(ArrayDataset(x[train], y[train]), ArrayDataset(x[test], y[test]), 10, (1, 8, 8))
