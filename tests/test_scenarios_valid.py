"""Every scenario in scenarios/ is a valid scenario, and the experiment scenarios run one small round.

Scenarios name their data and traces as ``${FEDGC_DATA_DIR}/...`` and ``${FEDGC_TRACE_DIR}/...``
(fedgc.scenario.paths.data_dir): FEDGC_DATA_DIR when set, else FEDGC_SHARED_DIR, else the user cache when it
holds the file (``fedgc fetch``), else the shared folder next to the repository, so they run from any
working directory. A scenario whose files are missing is skipped, not failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedgc.scenario.model import load_tree, validate
from tests.conftest import REPO, get_shared, shared_dir

SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))


def rebased_tree(path: Path) -> dict:
    """The scenario as loaded (absolute paths); skipped when its shared traces are not there."""
    tree = load_tree(path)
    trace_dir = tree.get("network", {}).get("trace_dir")
    if trace_dir is not None and not Path(trace_dir).is_dir():
        pytest.skip(get_shared(trace_dir, "traces"))
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


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_experiment_scenario_runs(name: str, tmp_path: Path, mnist_root: Path):
    from fedgc.cli.run import main
    from fedgc.scenario.model import dump_scenario

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


def test_bundled_paths_follow_the_data_directory(monkeypatch, tmp_path):
    """FEDGC_DATA_DIR, else FEDGC_SHARED_DIR, else the user cache if it holds the file, else ../shared."""
    checkout_shared = REPO.parent / "shared"
    if not (checkout_shared / "traces" / "mahimahi").is_dir() or not (checkout_shared / "data" / "mnist").is_dir():
        pytest.skip(get_shared(checkout_shared, "mnist traces", shared=checkout_shared))
    for name in ("FEDGC_DATA_DIR", "FEDGC_TRACE_DIR", "FEDGC_SHARED_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # the working directory plays no part
    scenario = REPO / "scenarios" / "mnist_lte_dropouts.yaml"

    def paths() -> tuple[str, str]:
        tree = load_tree(scenario)
        return tree["data"]["root"], tree["network"]["trace_dir"]

    # Nothing set, empty cache: the shared folder next to the repository (development setup).
    assert paths() == (str(checkout_shared / "data" / "mnist"), str(checkout_shared / "traces" / "mahimahi"))
    # The user cache wins where it holds the file (here MNIST only; traces still from ../shared).
    (tmp_path / "cache" / "fedgc" / "mnist").mkdir(parents=True)
    assert paths() == (str(tmp_path / "cache" / "fedgc" / "mnist"), str(checkout_shared / "traces" / "mahimahi"))
    # FEDGC_SHARED_DIR still works (shared layout: data/ and traces/), whether or not the files are there.
    monkeypatch.setenv("FEDGC_SHARED_DIR", str(tmp_path / "elsewhere"))
    assert paths() == (str(tmp_path / "elsewhere" / "data" / "mnist"), str(tmp_path / "elsewhere" / "traces" / "mahimahi"))
    # FEDGC_DATA_DIR wins (fetch layout: <dir>/mnist, <dir>/traces/...), and FEDGC_TRACE_DIR over it for traces.
    monkeypatch.setenv("FEDGC_DATA_DIR", "data-dir")  # relative: to the current directory
    assert paths() == (str(tmp_path / "data-dir" / "mnist"), str(tmp_path / "data-dir" / "traces" / "mahimahi"))
    monkeypatch.setenv("FEDGC_TRACE_DIR", str(tmp_path / "t"))
    assert paths()[1] == str(tmp_path / "t" / "mahimahi")


def test_with_no_data_anywhere_paths_point_at_the_user_cache(monkeypatch, tmp_path):
    for name in ("FEDGC_DATA_DIR", "FEDGC_TRACE_DIR", "FEDGC_SHARED_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr("fedgc.scenario.paths.checkout_shared_dir", lambda: None)  # an installed package, no checkout
    tree = load_tree(REPO / "scenarios" / "mnist_3g_dropouts.yaml")
    assert tree["data"]["root"] == str(tmp_path / "cache" / "fedgc" / "mnist")
    assert tree["network"]["trace_dir"] == str(tmp_path / "cache" / "fedgc" / "traces" / "pensieve" / "norway_hsdpa_cooked_3gp")


@pytest.mark.slow
def test_a_bundled_scenario_checks_from_another_directory(tmp_path, mnist_root):
    env = {**os.environ, "FEDGC_SHARED_DIR": str(shared_dir().resolve())}
    proc = subprocess.run([sys.executable, "-m", "fedgc.cli.run", str(REPO / "scenarios" / "fedavg_mnist_cnn.yaml"),
                           "--check"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: fedavg_mnist_cnn: 100 clients")
