"""A client's device: how fast it trains, and the FedScale-style capacity file.

Named tiers (``network.device: {name: tier, tier: ...}``) are illustrative speeds for the small models of this project;
``mixed`` draws one of low/mid/high per client with equal probability. The capacity file (FedScale's
``client_device_capacity``, CSV with ``computation_ms_per_sample``, ``dl_kbps``, ``ul_kbps`` columns)
gives measured per-device figures; FedScale's ``computation`` is the forward latency per sample, and
training costs ``scale`` (FedScale: 3) times that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedgc.network.csvfile import read_csv_rows

DEVICE_TIERS: dict[str, float] = {"low": 100.0, "mid": 500.0, "high": 2000.0}


@dataclass(frozen=True)
class Device:
    samples_per_s: float

    def __post_init__(self) -> None:
        if not self.samples_per_s > 0:
            raise ValueError("device samples_per_s must be > 0")

    def compute_time(self, samples: int) -> float:
        return samples / self.samples_per_s


def tier_speeds(tier: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Samples/s for ``n`` devices of a named tier (``mixed``: one of the tiers per device)."""
    if tier == "mixed":
        return rng.choice(np.array(list(DEVICE_TIERS.values())), size=n)
    if tier not in DEVICE_TIERS:
        raise ValueError(f"unknown device tier {tier!r}; known: {', '.join([*DEVICE_TIERS, 'mixed'])}")
    return np.full(n, DEVICE_TIERS[tier])


CAPACITY_COLUMNS = ("computation_ms_per_sample", "dl_kbps", "ul_kbps")


def read_capacity_file(path: str | Path) -> dict[str, np.ndarray]:
    """The capacity CSV's columns as float arrays; a one-line ValueError naming the file on any problem."""
    path = Path(path)
    rows = read_csv_rows(path, "capacity file")
    try:
        columns = {name: np.array([float(row[name]) for row in rows]) for name in CAPACITY_COLUMNS}
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"capacity file {path}: expected numeric columns {', '.join(CAPACITY_COLUMNS)}") from None
    if not rows or any(not np.all((col > 0) & np.isfinite(col)) for col in columns.values()):
        raise ValueError(f"capacity file {path}: needs at least one row and all values finite and > 0")
    return columns


def assign_rows(n_rows: int, n_clients: int, rng: np.random.Generator) -> np.ndarray:
    """Which file row each client gets: a seeded random permutation (with replacement beyond the file's size)."""
    if n_clients <= n_rows:
        return rng.permutation(n_rows)[:n_clients]
    return rng.integers(0, n_rows, size=n_clients)
