"""The worked examples in examples/ run as a user runs them (a fresh Python process, --quick settings,
offline), exit 0 and end with their result table. They use only ``import fedgc`` public names: that is
what makes them the test of "a script written from docs/api.md alone"."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fedgc

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

# example -> a line its final table must hold
TABLES = {
    "own_model_and_data.py": "| own-model-and-data | dgc |",  # runs kept in memory: named by their own names
    "own_compressor.py": "| energy_topk  |",
    "own_aggregation_rule.py": "| clipped_mean |",
    "sweep_with_seeds.py": "| compression.density=0.01 | dgc | 2 |",
}


def test_the_example_set_is_the_one_tested():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(TABLES)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_examples_use_only_public_fedgc_names(name):
    tree = ast.parse((EXAMPLES / name).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert all(a.name == "fedgc" or not a.name.startswith("fedgc") for a in node.names), name
        elif isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("fedgc"), f"{name}: import fedgc, then fedgc.<name>"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "fedgc":
            assert node.attr in fedgc.__all__, f"{name}: fedgc.{node.attr} is not public"


@pytest.mark.slow  # 20-45 s each on a loaded 2-core machine
@pytest.mark.parametrize("name", sorted(TABLES))
def test_examples_run_and_print_their_table(name, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(EXAMPLES / name), "--quick"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert TABLES[name] in done.stdout, done.stdout[-3000:]
    assert list(tmp_path.iterdir()) == [], "an example left files in the working directory"
