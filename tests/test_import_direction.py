"""Layering, checked on the source with ast (every import, including those inside functions): the
Flower-free side never imports Flower or ``fedgc.flower`` (but for the two engine doors), the two sides of
the wire never import each other, nothing below the commands and the API imports them, and the leaves of
the core (compress, network, data, models, wire) import only themselves and what is listed for them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fedgc"
# The package's root: its face, ``python -m fedgc``, and three singletons every room uses. A new module
# goes into the folder of its concept (docs/architecture.md), not here.
ROOT_MODULES = {"__init__.py", "__main__.py", "errors.py", "bounded.py", "invocation.py"}
# The two doors from the Flower-free side to fedgc.flower (never to flwr itself): the engines run the round
# loop on the inline grid or on Flower's simulation runtime, and ``fedgc submit`` drives ``flwr run``.
ENGINE_DOORS = {"runs/engines.py": "fedgc.flower", "cli/submit.py": "fedgc.flower.runtime"}
FLOWER_FREE = sorted(path.name for path in PACKAGE.iterdir()
                     if path.name not in ("flower", "scenarios", "__pycache__") and (path.is_dir() or path.suffix == ".py"))
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
    """``file: module`` for every import of flwr or fedgc.flower under ``entry`` (an engine door may import
    what ENGINE_DOORS allows it of fedgc.flower, never flwr)."""
    found = []
    for path in files(root, entry):
        door = ENGINE_DOORS.get(path.relative_to(root).as_posix())
        found += [f"{path.relative_to(root)}: {m}" for m in sorted(imported_modules(path))
                  if within(m, "flwr") or (within(m, "fedgc.flower") and not (door and within(m, door)))]
    return found


def side_imports(root: Path, entry: str, forbidden: tuple[str, ...]) -> list[str]:
    """``file: module`` for every import under ``entry`` (a folder, or the modules directly in it when
    ``entry`` ends in ``/*``) of a package in ``forbidden``."""
    paths = sorted((root / entry[:-2]).glob("*.py")) if entry.endswith("/*") else files(root, entry)
    return [f"{path.relative_to(root)}: {m}" for path in paths for m in sorted(imported_modules(path))
            if any(within(m, f) for f in forbidden)]


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


def test_the_root_holds_only_the_face_and_the_singletons():
    assert {path.name for path in PACKAGE.glob("*.py")} == ROOT_MODULES


# The two sides of the wire: a file's folder says on which side it runs. What both sides read (keys,
# the update record, message sizes, the transport, the run config, the client config and the checks of
# a message's contents, the client state and its stores) sits in fedgc/flower itself and fedgc/flower/state.
SIDES = {"flower/client": ("fedgc.flower.server", "fedgc.flower.runtime"),
         "flower/server": ("fedgc.flower.client", "fedgc.flower.runtime"),
         "flower/*": ("fedgc.flower.client", "fedgc.flower.server", "fedgc.flower.runtime"),
         "flower/state": ("fedgc.flower.client", "fedgc.flower.server", "fedgc.flower.runtime")}


@pytest.mark.parametrize("entry", sorted(SIDES))
def test_a_side_of_the_wire_never_imports_the_other(entry):
    assert not side_imports(PACKAGE, entry, SIDES[entry])


@pytest.mark.parametrize("entry", [e for e in FLOWER_FREE if e not in ("cli", "api", "__init__.py", "__main__.py")])
def test_nothing_below_the_commands_and_the_api_imports_them(entry):
    assert not side_imports(PACKAGE, entry, ("fedgc.cli", "fedgc.api"))


# fedgc.flower holds adapters only: every module there imports flwr itself, except the two that drive
# Flower's command-line tools in processes of their own (and the packages' __init__ files).
FLOWER_CLI_DRIVERS = {"runtime/flower_engine.py", "runtime/runtime_processes.py"}


def flwr_free_modules(flower_package: Path) -> set[str]:
    """The modules under ``flower_package`` that import nothing of flwr themselves."""
    return {path.relative_to(flower_package).as_posix() for path in flower_package.rglob("*.py")
            if path.name != "__init__.py" and not any(within(m, "flwr") for m in imported_modules(path))}


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
    (tmp_path / "flower" / "client").mkdir()
    (tmp_path / "flower" / "client" / "app.py").write_text("def f():\n    from fedgc.flower.server.loop import run_rounds\n")
    assert side_imports(tmp_path, "flower/client", SIDES["flower/client"]) == [
        "flower/client/app.py: fedgc.flower.server.loop", "flower/client/app.py: fedgc.flower.server.loop.run_rounds"]
    assert side_imports(tmp_path, "flower/*", SIDES["flower/*"]) == []  # helper.py imports only fedgc.flower.adapter
