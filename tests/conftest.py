"""Shared fixtures: where the read-only shared data lives, and small fast scenarios."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same cases on every run (CI must be deterministic). To hunt for new
# failing cases locally: HYPOTHESIS_PROFILE=explore pytest ...
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in tests/test_jvm*.py is marked ``jvm`` (those files are the JVM client's; marked
    here by name so that a new one is deselected by ``make test-fast`` too)."""
    for item in items:
        if item.path.name.startswith("test_jvm"):
            item.add_marker(pytest.mark.jvm)


def shared_dir() -> Path:
    return Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared"))


@pytest.fixture(name="shared_dir")
def shared_traces_dir() -> Path:
    """The shared folder, for tests that replay its network traces."""
    path = shared_dir()
    if not (path / "traces").is_dir():
        pytest.skip(f"shared traces not found at {path} (set FEDGC_SHARED_DIR)")
    return path


@pytest.fixture
def mnist_root() -> Path:
    root = shared_dir() / "data" / "mnist"
    if not (root / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"MNIST files not found under {root} (set FEDGC_SHARED_DIR)")
    return root


@pytest.fixture
def tiny_scenario() -> dict:
    """A scenario tree that runs in about a second: 4 digit clients, 2 rounds."""
    return {
        "name": "tiny",
        "seed": 7,
        "rounds": 2,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
        "model": {"name": "mlp"},
        "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "topk", "density": 0.05},
        "strategy": {"fraction": 1.0},
        "network": {"profile": "lte"},
        "eval": {"target_accuracy": 0.5},
    }


@pytest.fixture
def isolated_registries():
    """What a test registers (a user's model, dataset, compressor, rule or optimizer) is gone after it:
    other tests iterate the registries and must see the built-ins only."""
    from fedgc import extensions
    from fedgc.aggregators import AGGREGATORS
    from fedgc.compress.registry import COMPRESSORS
    from fedgc.data.user import USER_DATASETS
    from fedgc.models import MODELS
    from fedgc.server_optim import SERVER_OPTIMIZERS

    tables = (MODELS, COMPRESSORS, AGGREGATORS, SERVER_OPTIMIZERS, USER_DATASETS, extensions._SOURCES)
    saved = [dict(table) for table in tables]
    yield
    for table, before in zip(tables, saved):
        table.clear()
        table.update(before)
