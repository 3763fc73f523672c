"""The notebooks run end to end (nbclient, a real kernel) with small parameters, offline, and are stored
with their outputs cleared."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from tests.conftest import shared_dir

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"

# Injected right after each notebook's "parameters" cell: one round and few runs keep every notebook fast.
FAST = {
    "01_quickstart.ipynb": "ROUNDS = 1",
    "02_compression_tradeoffs.ipynb": 'ROUNDS = 1\nCOMPRESSORS = ["dgc"]\nDENSITIES = [0.05]',
    "03_mobile_networks.ipynb": 'ROUNDS = 1\nNETWORKS = ["3g"]',
    "04_bring_your_own_compressor.ipynb": 'ROUNDS = 1\nCOMPRESSORS = ["topk", "energy_topk"]',
}


@pytest.fixture(scope="module")
def kernel():
    """One kernel for the module: starting one and importing torch and Flower is most of a notebook's time.
    Each notebook starts with ``%reset -f`` (an empty namespace: a missing import still fails)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=env)
    yield manager
    manager.shutdown_kernel(now=True)


def execute(kernel: KernelManager, name: str, overrides: str, cwd: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    at = next(i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", []))
    notebook.cells.insert(at + 1, nbformat.v4.new_code_cell(overrides))
    notebook.cells.insert(0, nbformat.v4.new_code_cell(f"%reset -f\nimport os\nos.chdir({str(cwd)!r})\ndel os"))
    NotebookClient(notebook, km=kernel, timeout=240).execute()
    return notebook


def images(notebook: nbformat.NotebookNode) -> int:
    return sum("image/png" in out.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
               for out in cell.get("outputs", []))


def test_the_notebook_set_is_the_one_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(FAST)


@pytest.mark.parametrize("name", sorted(FAST))
def test_notebooks_are_stored_without_outputs(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear the outputs before committing"


@pytest.mark.notebook
def test_01_quickstart_runs_and_reads_its_metrics(kernel, tmp_path):
    notebook = execute(kernel, "01_quickstart.ipynb", FAST["01_quickstart.ipynb"], tmp_path)
    run = tmp_path / "runs" / "nb01-quickstart"
    assert (run / "metrics.jsonl").read_text().count("\n") == 1
    assert images(notebook) >= 2  # its own accuracy plots and fedgc's participation plot


@pytest.mark.notebook
def test_02_compression_tradeoffs_compares_the_runs(kernel, tmp_path):
    notebook = execute(kernel, "02_compression_tradeoffs.ipynb", FAST["02_compression_tradeoffs.ipynb"], tmp_path)
    out = tmp_path / "runs" / "nb02-compression"
    assert sorted(p.name for p in out.iterdir()) == ["dgc@0.05", "none", "report"]
    assert (out / "report" / "report.md").is_file()
    assert images(notebook) >= 2


@pytest.mark.notebook
def test_03_mobile_networks_replays_traces_when_there_else_profiles(kernel, tmp_path):
    traces = (shared_dir() / "traces" / "mahimahi").is_dir()
    shared = str(shared_dir()) if traces else "no-such-folder"
    notebook = execute(kernel, "03_mobile_networks.ipynb", FAST["03_mobile_networks.ipynb"] + f"\nSHARED_DIR = {shared!r}",
                       tmp_path)
    runs = sorted(p.name for p in (tmp_path / "runs" / "nb03-networks").iterdir())
    assert runs == (["3g", "3g-trace"] if traces else ["3g"])
    assert images(notebook) == 1


@pytest.mark.notebook
def test_04_bring_your_own_compressor_measures_it_like_a_built_in(kernel, tmp_path):
    notebook = execute(kernel, "04_bring_your_own_compressor.ipynb", FAST["04_bring_your_own_compressor.ipynb"],
                       tmp_path)
    shown = "".join(str(out.get("data", {}).get("text/markdown", "")) for cell in notebook.cells
                    if cell.cell_type == "code" for out in cell.get("outputs", []))
    assert "| energy_topk |" in shown and "| topk |" in shown  # its row in fedgc.table, next to top-k's
    assert images(notebook) == 1
    assert list(tmp_path.iterdir()) == []  # the runs stay in memory


def find_shared_dir_cell() -> str:
    notebook = nbformat.read(NOTEBOOKS / "03_mobile_networks.ipynb", as_version=4)
    return next(cell.source for cell in notebook.cells if "def find_shared_dir" in cell.source)


def test_03_finds_no_traces_on_a_fresh_machine(tmp_path, monkeypatch):
    """The notebook's own trace lookup, run in-process: no shared folder anywhere → named profiles only."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEDGC_SHARED_DIR", str(tmp_path / "nothing-here"))
    namespace = {"SHARED_DIR": None, "USE_TRACES": True}
    exec("import os\nfrom pathlib import Path\n" + find_shared_dir_cell(), namespace)  # noqa: S102
    assert namespace["shared"] is None
    (tmp_path / "shared" / "traces" / "mahimahi").mkdir(parents=True)
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    monkeypatch.delenv("FEDGC_SHARED_DIR")
    exec("import os\nfrom pathlib import Path\n" + find_shared_dir_cell(), namespace)  # noqa: S102
    assert namespace["shared"].resolve() == (tmp_path / "shared").resolve()
