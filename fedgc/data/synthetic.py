"""The synthetic(α, β) benchmark of FedProx (Li et al., MLSys 2020, §5.1; their generate_synthetic.py).

Device k draws u_k ~ N(0, α) and B_k ~ N(0, β); its model has W_k ∈ R^{60×10} with entries
~ N(u_k, 1) and b_k ∈ R^10 with entries ~ N(u_k, 1); its features x ~ N(v_k, Σ) with v_k entries
~ N(B_k, 1) and Σ diagonal, Σ_jj = j^-1.2; labels y = argmax(softmax(x W_k + b_k)). α controls how
much the local models differ, β how much the local data differ. Sample counts per device follow
the paper's power law, ``int(lognormal(4, 2)) + 50`` (mean ≈ 450, heavy-tailed: a device may hold
tens of thousands), capped at ``max_samples`` per device when that is set (the ``synthetic.
max_samples_per_device`` key; the cap is what lets 100,000 devices fit in memory). ``iid: true`` gives FedProx's synthetic_iid
(one W, b for all devices, v_k = 0). Each device's samples are split 90 % train / 10 % test, as in
the paper; the test parts, pooled, are the central test split. Devices are the natural clients.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset


def device_sizes(num_devices: int, rng: np.random.Generator, max_samples: int | None = None) -> np.ndarray:
    """Each device's sample count, the generator's first draw (so a scenario's data size is known from
    its seed before anything is generated: ``fedgc.data.config.synthetic_bytes``)."""
    sizes = rng.lognormal(4.0, 2.0, num_devices).astype(np.int64) + 50
    return np.minimum(sizes, max_samples) if max_samples is not None else sizes


def generate_synthetic(num_devices: int, rng: np.random.Generator, *, alpha: float = 1.0, beta: float = 1.0,
                       iid: bool = False, dimension: int = 60, num_classes: int = 10,
                       train_fraction: float = 0.9, max_samples: int | None = None) -> CentralDataset:
    sizes = device_sizes(num_devices, rng, max_samples)
    mean_w = rng.normal(0.0, alpha, num_devices)
    b_means = rng.normal(0.0, beta, num_devices)
    std_x = np.power(np.arange(1, dimension + 1, dtype=np.float64), -1.2) ** 0.5
    w_global = rng.normal(0.0, 1.0, (dimension, num_classes))
    b_global = rng.normal(0.0, 1.0, num_classes)
    # The splits are allocated once and filled device by device (float64 per device, stored as
    # float32): the same values as concatenating the devices, without holding them all in float64.
    n_train = (train_fraction * sizes).astype(np.int64)  # int(train_fraction * n), as the paper
    n_test = sizes - n_train
    xtr = np.empty((int(n_train.sum()), dimension), dtype=np.float32)
    ytr = np.empty(int(n_train.sum()), dtype=np.int64)
    xte = np.empty((int(n_test.sum()), dimension), dtype=np.float32)
    yte = np.empty(int(n_test.sum()), dtype=np.int64)
    at_train = at_test = 0
    for k in range(num_devices):
        v = np.zeros(dimension) if iid else rng.normal(b_means[k], 1.0, dimension)
        if iid:
            w, b = w_global, b_global
        else:
            w = rng.normal(mean_w[k], 1.0, (dimension, num_classes))
            b = rng.normal(mean_w[k], 1.0, num_classes)
        x = v + rng.standard_normal((int(sizes[k]), dimension)) * std_x
        y = np.argmax(x @ w + b, axis=1)  # argmax of softmax == argmax of logits
        cut, rest = int(n_train[k]), int(n_test[k])
        xtr[at_train:at_train + cut], ytr[at_train:at_train + cut] = x[:cut], y[:cut]
        xte[at_test:at_test + rest], yte[at_test:at_test + rest] = x[cut:], y[cut:]
        at_train, at_test = at_train + cut, at_test + rest
    groups = np.repeat(np.arange(num_devices, dtype=np.int64), n_train)
    return CentralDataset(ArrayDataset(xtr, ytr), ArrayDataset(xte, yte), num_classes, (dimension,),
                          train_groups=groups, group_names=[f"device_{k}" for k in range(num_devices)])
