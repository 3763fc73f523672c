"""Layering, checked on the source with ast (every import, including those inside functions):
the Flower-free core never imports Flower or ``fedgc.flower``, and the leaves of the core (compress,
network, data, models, wire) import only themselves and what is listed for them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fedgc"
FLOWER_FREE = ["scenario_errors.py", "sweep_jobs.py", "compress", "network", "data", "models", "wire", "core",
               "training.py", "server_optim.py", "metrics.py", "scenario.py", "plots", "progress.py", "run_reports.py",
               "sweep_runner.py", "sweep_plan.py", "simulate.py",
               "api", "extensions.py", "import_paths.py", "options.py", "aggregators.py", "__init__.py", "scenario_sections.py",
               "check.py", "run_folder.py", "yaml12.py", "execution", "fetch", "paths.py", "process_tree.py",
               "process_guard.py", "runtime_record.py", "bounded.py", "readiness.py", "temporary_folders.py",
               "builtin_scenarios.py", "errors.py", "invocation.py"]
# Inside the core: which fedgc packages each leaf may import besides itself (nothing else of fedgc).
# fedgc.fetch.hint: the ``fedgc fetch`` command a missing data set or trace names (it reads only
# fetch's own file list, fedgc/fetch/files.tsv). fedgc.errors: the base of the user errors (imports nothing).
LEAVES = {"compress": set(), "network": {"fedgc.bounded", "fedgc.fetch.hint"},
          "data": {"fedgc.fetch.hint", "fedgc.errors"},
          "models": set(), "wire": {"fedgc.compress"}}


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports; ``from a import b`` counts as both ``a`` and ``a.b`` (b may be a module)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def files(root: Path, entry: str) -> list[Path]:
    target = root / entry
    return sorted(target.rglob("*.py")) if target.is_dir() else [target]


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def flower_imports(root: Path, entry: str) -> list[str]:
    """``file: module`` for every import of flwr or fedgc.flower under ``entry``."""
    return [f"{path.relative_to(root)}: {m}" for path in files(root, entry) for m in sorted(imported_modules(path))
            if within(m, "flwr") or within(m, "fedgc.flower")]


def foreign_imports(root: Path, leaf: str, allowed: set[str]) -> list[str]:
    """``file: module`` for every fedgc import under ``leaf`` outside the leaf itself and ``allowed``."""
    own = {f"fedgc.{leaf}"} | allowed
    return [f"{path.relative_to(root)}: {m}" for path in files(root, leaf) for m in sorted(imported_modules(path))
            if within(m, "fedgc") and m != "fedgc" and not any(within(m, p) for p in own)]


@pytest.mark.parametrize("entry", FLOWER_FREE)
def test_the_core_never_imports_flower(entry):
    assert not flower_imports(PACKAGE, entry)


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_a_leaf_imports_only_itself(leaf):
    assert not foreign_imports(PACKAGE, leaf, LEAVES[leaf])


# fedgc.flower holds adapters only: every module there imports flwr itself, except the two that drive
# Flower's command-line tools in processes of their own (and the package's empty __init__).
FLOWER_CLI_DRIVERS = {"flower_engine.py", "runtime_processes.py"}


def flwr_free_modules(flower_package: Path) -> set[str]:
    """The modules directly in ``flower_package`` that import nothing of flwr themselves."""
    return {path.name for path in flower_package.glob("*.py") if path.name != "__init__.py"
            and not any(within(m, "flwr") for m in imported_modules(path))}


def test_every_module_of_the_flower_package_but_the_cli_drivers_adapts_flwr():
    assert flwr_free_modules(PACKAGE / "flower") == FLOWER_CLI_DRIVERS


def test_a_planted_violation_is_caught(tmp_path):
    """The checks fail on the imports they exist to forbid, nested in a function as a lazy import would be."""
    (tmp_path / "network").mkdir()
    (tmp_path / "network" / "link.py").write_text(
        "def f():\n    from fedgc.flower.setup import SCENARIO_YAML\n    import fedgc.compress.dgc\n")
    (tmp_path / "sweep.py").write_text("from fedgc import flower\n")
    assert flower_imports(tmp_path, "network") == ["network/link.py: fedgc.flower.setup",
                                                   "network/link.py: fedgc.flower.setup.SCENARIO_YAML"]
    assert flower_imports(tmp_path, "sweep.py") == ["sweep.py: fedgc.flower"]
    assert "network/link.py: fedgc.compress.dgc" in foreign_imports(tmp_path, "network", set())
    (tmp_path / "flower").mkdir()
    (tmp_path / "flower" / "adapter.py").write_text("def f():\n    from flwr.app import Message\n")
    (tmp_path / "flower" / "helper.py").write_text("import os\nfrom fedgc.flower import adapter\n")
    assert flwr_free_modules(tmp_path / "flower") == {"helper.py"}
