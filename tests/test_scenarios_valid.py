"""Every scenario in scenarios/ is a valid scenario, and the experiment scenarios run one small round.

Scenarios name the shared data and traces as ``../shared/...`` (relative to the repository root, where
runs start). Here those paths are re-rooted at ``shared_dir()`` (``$FEDGC_SHARED_DIR``, default
``../shared``), so the tests run from any working directory; a scenario whose shared files are
missing is skipped, not failed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedgc.scenario import load_tree, validate
from tests.conftest import REPO, shared_dir

SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))
SHARED_PREFIX = "../shared/"


def _rebase(path: str | None) -> str | None:
    if path is None or not path.startswith(SHARED_PREFIX):
        return path
    return str(shared_dir() / path.removeprefix(SHARED_PREFIX))


def rebased_tree(path: Path) -> dict:
    tree = load_tree(path)
    data, net = tree.get("data", {}), tree.get("network", {})
    if "root" in data:
        data["root"] = _rebase(data["root"])
    if "trace_dir" in net:
        net["trace_dir"] = _rebase(net["trace_dir"])
        if not Path(net["trace_dir"]).is_dir():
            pytest.skip(f"shared traces not found at {net['trace_dir']} (set FEDGC_SHARED_DIR)")
    return tree


def test_there_are_scenarios():
    assert len(SCENARIOS) >= 6


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_scenario_validates(path: Path):
    scenario = validate(rebased_tree(path))
    assert scenario.name == path.stem
    assert scenario.rounds >= 1


# One small round of each experiment scenario (bench/dgc_mnist.py, bench/mobile_time_to_target.py).
SMALL = {
    "dgc_mnist.yaml": [
        "rounds=2",
        "data.max_train_samples=2000",
        "data.max_test_samples=500",
        "compression.warmup_rounds=1",
    ],
    "mnist_lte_dropouts.yaml": ["rounds=1", "data.max_train_samples=3000", "data.max_test_samples=500"],
    "mnist_3g_dropouts.yaml": ["rounds=1", "data.max_train_samples=3000", "data.max_test_samples=500"],
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_experiment_scenario_runs(name: str, tmp_path: Path, mnist_root: Path):
    from fedgc.scenario import dump_scenario
    from fedgc.simulate import main

    tree = rebased_tree(REPO / "scenarios" / name)
    scenario_file = tmp_path / name
    scenario_file.write_text(dump_scenario(validate(tree)))
    out = tmp_path / "run"
    assert (
        main([str(scenario_file), "--out", str(out), "--quiet", *[a for s in SMALL[name] for a in ("--set", s)]]) == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates_applied"] >= 1
    assert summary["bytes_up"] > 0
    assert summary["compression_ratio_up"] > 1.0  # DGC uploads are smaller than dense ones
