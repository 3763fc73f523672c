"""No import circle in ``fedgc``: every import counts, at module level, under ``TYPE_CHECKING`` and
inside functions. ``from fedgc.x import y`` depends on ``fedgc.x`` and on ``fedgc.x.y`` when that is a
module; a package's ``__init__`` is the package's module. A strongly connected component of more than
one module is a circle; the test names its modules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "fedgc"


def module_names(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """``fedgc.a.b`` → its file, for every ``.py`` file of the package."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def dependencies(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other modules of the package (every import statement in the file)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, module, is_package)
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                # ``import fedgc.a.b`` also runs fedgc.a; count the module itself, the nearest stored one
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module and (target.startswith(PACKAGE + ".") or target == PACKAGE):
                    deps.add(target)
        graph[module] = deps
    return graph


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (sorted)."""
    reach = {module: _reaches(graph, module) for module in graph}
    found: list[list[str]] = []
    done: set[str] = set()
    for module in sorted(graph):
        if module in done:
            continue
        component = sorted(m for m in reach[module] if module in reach[m]) if module in reach[module] else []
        if len(component) > 1:
            found.append(component)
            done.update(component)
    return found


def _an_edge_path(graph: dict[str, set[str]], component: list[str]) -> str:
    """One closed path through the circle, ``a → b → a``, for the failure message."""
    inside = set(component)
    start, path, seen = component[0], [component[0]], {component[0]}
    while True:
        nxt = sorted(m for m in graph[path[-1]] if m in inside)
        back = [m for m in nxt if m == start]
        if back and len(path) > 1:
            return " → ".join([*path, start])
        step = next((m for m in nxt if m not in seen), None)
        if step is None:
            return " → ".join([*path, nxt[0]])
        path.append(step)
        seen.add(step)


def test_the_import_graph_is_read():
    graph = dependencies(module_names())
    assert "fedgc.compress.base" in graph["fedgc.compress.topk"]
    # relative, TYPE_CHECKING and function-local imports count
    tiny = {"p": {"p.a", "p.b"}, "p.a": {"p.b"}, "p.b": {"p.a"}}
    assert circles(tiny) == [["p.a", "p.b"]]


def test_no_import_circle_in_fedgc():
    graph = dependencies(module_names())
    found = circles(graph)
    lines = [f"{len(c)} modules: {', '.join(c)} (e.g. {_an_edge_path(graph, c)})" for c in found]
    assert not found, "import circles in fedgc (TYPE_CHECKING and function-local imports count):\n" + "\n".join(lines)


def test_the_data_section_names_every_dataset():
    """``fedgc.data.config`` lists the dataset names itself (importing ``fedgc.data`` would close a circle)."""
    from fedgc.data import DATASETS
    from fedgc.data.config import DATASET_NAMES

    assert tuple(DATASETS) == DATASET_NAMES


if __name__ == "__main__":
    graph = dependencies(module_names())
    for component in circles(graph):
        print(len(component), _an_edge_path(graph, component))
        print("   ", ", ".join(component))
    sys.exit(1 if circles(graph) else 0)
