"""The notebooks use fedgc's public API only (``fedgc.__all__``, docs/api.md): every code cell is parsed
with ``ast`` (no kernel) and any reach past the public names fails, naming the notebook, the cell and
the name. Internals move; a notebook written against them breaks on the next refactoring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

import fedgc

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
PUBLIC = frozenset(fedgc.__all__)
IMPORTERS = {"import_module", "__import__"}  # importlib.import_module("fedgc.x"), __import__("fedgc.x")


def _python(source: str) -> str:
    """The cell without IPython's own syntax (line magics, shell escapes, cell magics' first line),
    blanked line for line so that line numbers stay the cell's."""
    return "\n".join("" if re.match(r"\s*[%!]", line) else line for line in source.splitlines())


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use of a non-public fedgc name in one cell's code."""
    tree = ast.parse(_python(source))
    aliases = set()  # names bound to the fedgc package itself: import fedgc / import fedgc as fg
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "fedgc":
                    aliases.add(alias.asname or "fedgc")
                elif alias.name.startswith("fedgc."):
                    found.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("fedgc."):
                found.append((node.lineno, f"from {node.module} import ..."))
            elif node.module == "fedgc":
                found += [(node.lineno, f"from fedgc import {alias.name}") for alias in node.names
                          if alias.name != "*" and alias.name not in PUBLIC]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            target = node.args[0].value
            if called in IMPORTERS and isinstance(target, str) and target.startswith("fedgc."):
                found.append((node.lineno, f"{called}({target!r})"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr not in PUBLIC):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return sorted(set(found))


def notebook_problems(path: Path) -> list[str]:
    notebook = nbformat.read(path, as_version=4)
    problems = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        where = f"{path.name}, cell {index}" + (f" (id {cell.id})" if cell.get("id") else "")
        try:
            uses = private_uses(cell.source)
        except SyntaxError as err:
            problems.append(f"{where}: does not parse ({err.msg}, line {err.lineno})")
            continue
        problems += [f"{where}, line {line}: {what} is not public fedgc API (fedgc.__all__, docs/api.md)"
                     for line, what in uses]
    return problems


def test_there_are_notebooks_to_check():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_use_only_public_fedgc_names(path):
    problems = notebook_problems(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("source, what", [
    ("import fedgc.sweeps.runner", "import fedgc.sweeps.runner"),
    ("import fedgc.api.runs as runs", "import fedgc.api.runs"),
    ("from fedgc.scenario.model import validate", "from fedgc.scenario.model import ..."),
    ("from fedgc import run_reports", "from fedgc import run_reports"),
    ("from fedgc import Scenario, plots", "from fedgc import plots"),
    ("import fedgc\nfedgc.sweeps.runner.run_point(s, out)", "fedgc.sweeps"),
    ("import fedgc as fg\nsummary = fg.run_reports.read_run(path)", "fg.run_reports"),
    ("import importlib\nimportlib.import_module('fedgc.runs.metrics')", "import_module('fedgc.runs.metrics')"),
    ("%matplotlib inline\nfrom fedgc.runs.metrics import Summary", "from fedgc.runs.metrics import ..."),
])
def test_the_check_catches_each_way_past_the_api(source, what):
    assert what in [w for _, w in private_uses(source)]


@pytest.mark.parametrize("source", [
    "import fedgc\nrun = fedgc.run(fedgc.Scenario.from_dict(tree), on_round=print)\nfedgc.table([run])",
    "import fedgc as fg\nfg.load_run('runs/x').to_pandas()",
    "from fedgc import Scenario, run, sweep",
    "import fedgcx.internal\nfrom fedgc_plugins.x import y",  # other packages, not fedgc
    "%reset -f\nimport fedgc\nfedgc.ScenarioError",
])
def test_the_check_passes_the_public_api(source):
    assert private_uses(source) == []


def test_a_problem_names_the_notebook_the_cell_and_the_name(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("import fedgc\n\nfedgc.core")]
    path = tmp_path / "t.ipynb"
    nbformat.write(notebook, path)
    [problem] = notebook_problems(path)
    assert problem.startswith(f"t.ipynb, cell 1 (id {notebook.cells[1].id}), line 3: fedgc.core is not public")
