"""The synthetic(α, β) benchmark of FedProx (Li et al., MLSys 2020, §5.1; their generate_synthetic.py).

Device k draws u_k ~ N(0, α) and B_k ~ N(0, β); its model has W_k ∈ R^{60×10} with entries
~ N(u_k, 1) and b_k ∈ R^10 with entries ~ N(u_k, 1); its features x ~ N(v_k, Σ) with v_k entries
~ N(B_k, 1) and Σ diagonal, Σ_jj = j^-1.2; labels y = argmax(softmax(x W_k + b_k)). α controls how
much the local models differ, β how much the local data differ. Sample counts per device follow
the paper's power law, ``int(lognormal(4, 2)) + 50``. ``iid: true`` gives FedProx's synthetic_iid
(one W, b for all devices, v_k = 0). Each device's samples are split 90 % train / 10 % test, as in
the paper; the test parts, pooled, are the central test split. Devices are the natural clients.
"""

from __future__ import annotations

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset


def generate_synthetic(num_devices: int, rng: np.random.Generator, *, alpha: float = 1.0, beta: float = 1.0,
                       iid: bool = False, dimension: int = 60, num_classes: int = 10,
                       train_fraction: float = 0.9) -> CentralDataset:
    sizes = rng.lognormal(4.0, 2.0, num_devices).astype(np.int64) + 50
    mean_w = rng.normal(0.0, alpha, num_devices)
    b_means = rng.normal(0.0, beta, num_devices)
    std_x = np.power(np.arange(1, dimension + 1, dtype=np.float64), -1.2) ** 0.5
    w_global = rng.normal(0.0, 1.0, (dimension, num_classes))
    b_global = rng.normal(0.0, 1.0, num_classes)
    parts: dict[str, list[np.ndarray]] = {"xtr": [], "ytr": [], "gtr": [], "xte": [], "yte": []}
    for k in range(num_devices):
        v = np.zeros(dimension) if iid else rng.normal(b_means[k], 1.0, dimension)
        if iid:
            w, b = w_global, b_global
        else:
            w = rng.normal(mean_w[k], 1.0, (dimension, num_classes))
            b = rng.normal(mean_w[k], 1.0, num_classes)
        x = v + rng.standard_normal((int(sizes[k]), dimension)) * std_x
        y = np.argmax(x @ w + b, axis=1)  # argmax of softmax == argmax of logits
        n_train = int(train_fraction * len(y))
        parts["xtr"].append(x[:n_train])
        parts["ytr"].append(y[:n_train])
        parts["gtr"].append(np.full(n_train, k, dtype=np.int64))
        parts["xte"].append(x[n_train:])
        parts["yte"].append(y[n_train:])
    cat = {key: np.concatenate(value) for key, value in parts.items()}
    train = ArrayDataset(cat["xtr"].astype(np.float32), cat["ytr"].astype(np.int64))
    test = ArrayDataset(cat["xte"].astype(np.float32), cat["yte"].astype(np.int64))
    return CentralDataset(train, test, num_classes, (dimension,), train_groups=cat["gtr"],
                          group_names=[f"device_{k}" for k in range(num_devices)])
