"""Layering: compression, network, data and models never import Flower (checked on the source with ast)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fedgc"
FLOWER_FREE = ["compress", "network", "data", "models", "training.py", "server_optim.py", "metrics.py",
               "scenario.py", "plots", "progress.py", "report.py", "sweep.py"]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def files(entry: str) -> list[Path]:
    target = PACKAGE / entry
    return sorted(target.rglob("*.py")) if target.is_dir() else [target]


@pytest.mark.parametrize("entry", FLOWER_FREE)
def test_layer_never_imports_flwr(entry):
    for path in files(entry):
        flwr = {m for m in imported_modules(path) if m == "flwr" or m.startswith("flwr.")}
        assert not flwr, f"{path.relative_to(PACKAGE)} imports {sorted(flwr)}"
        assert "fedgc.flower" not in {m for m in imported_modules(path) if m.startswith("fedgc.flower")}


def test_the_checker_sees_an_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from flwr.app import Message\nimport numpy\n")
    assert "flwr.app" in imported_modules(probe)
