"""fedgc's public Python API (docs/api.md): what ``import fedgc`` promises, and that it keeps it.

The names and signatures are pinned here, so a change to them is a deliberate edit of this file and of
docs/api.md. The behaviour: ``fedgc.run`` in memory gives the same rounds as the command line's run
folder; a per-round callback sees every round; a run folder and a sweep folder read back; bad input is
one line (``ScenarioError``)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import tomllib
from dataclasses import asdict
from pathlib import Path

import pytest

import fedgc

pytestmark = pytest.mark.usefixtures("isolated_registries")

REPO = Path(__file__).resolve().parents[1]
TINY = {"name": "api-tiny", "seed": 3, "rounds": 2,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
        "model": {"name": "mlp", "options": {"hidden": [16]}},
        "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "topk", "density": 0.1},
        "strategy": {"fraction": 0.5}, "eval": {"every": 1}, "checkpoint_every": 0}

PUBLIC = {
    "ClientRecord": "(round: int, attempt: int, node: int, outcome: str, phase: str | None = None, "
                    "reason: str | None = None, download_s: float | None = None, compute_s: float | None = None, "
                    "upload_s: float | None = None, bytes_down: int | None = None, bytes_up: int | None = None, "
                    "clipped: bool = False, capped: bool = False, norm_before_clip: float | None = None, "
                    "norm_after_clip: float | None = None) -> None",
    "RoundObserver": "()",
    "RoundRecord": None,  # a dataclass of the metrics.jsonl fields (docs/metrics.md pins those)
    "Run": "(scenario: 'Scenario', summary: 'Summary', rounds: 'list[RoundRecord]', clients: 'list[ClientRecord]', "
           "weights: 'dict[str, torch.Tensor]', out_dir: 'Path | None' = None, label: 'str' = '') -> None",
    "Scenario": None,  # a pydantic model of the scenario keys (docs/metrics.md, the scenario reference)
    "ScenarioError": None,
    "Summary": None,  # the summary.json fields (docs/metrics.md)
    "Sweep": "(runs: 'list[Run]', out_dir: 'Path | None' = None) -> None",
    "load_run": "(path: 'str | Path') -> 'Run'",
    "load_sweep": "(path: 'str | Path') -> 'Sweep'",
    "plot": "(runs: 'Sequence[Run]', out: 'str | Path') -> 'list[Path]'",
    "report": "(runs: 'Iterable[Run | str | Path]', out: 'str | Path | None' = None, fmt: 'str' = 'md') -> 'str'",
    "run": "(scenario: 'Scenario | dict | str | Path', out: 'str | Path | None' = None, *, overwrite: 'bool' = False, "
           "on_round: 'Callable[[RoundRecord], object] | None' = None, quiet: 'bool' = True) -> 'Run'",
    "sweep": "(scenario: 'Scenario | dict | str | Path', grid: 'Mapping[str, Sequence[Any]] | None' = None, *, "
             "seeds: 'Sequence[int] | None' = None, out: 'str | Path | None' = None, overwrite: 'bool' = False, "
             "jobs: 'int' = 1, quiet: 'bool' = True) -> 'Sweep'",
    "table": "(runs: 'Sequence[Run]', fmt: 'str' = 'md') -> 'str'",
    "baseline": "(scenario: 'Scenario | dict | str | Path', out: 'str | Path | None' = None, *, "
                "overwrite: 'bool' = False, quiet: 'bool' = True) -> 'Comparison'",
    "Comparison": "(runs: 'list[Run]', out_dir: 'Path | None' = None) -> None",
    "RunFolderError": None,
    "FedgcError": None,  # the base of every one-line user error (docs/api.md, "Errors")
    # extending fedgc (tests/test_extensions.py)
    "register_model": "(name: 'str', builder: 'Callable[..., Any]', options: 'type[BaseModel] | None' = None, *, "
                      "replace: 'bool' = False) -> 'None'",
    "register_dataset": "(name: 'str', data: 'Any', *, replace: 'bool' = False) -> 'None'",
    "register_compressor": "(cls: 'type', name: 'str | None' = None, *, replace: 'bool' = False) -> 'None'",
    "register_aggregator": "(cls: 'type', name: 'str | None' = None, *, replace: 'bool' = False) -> 'None'",
    "register_server_optimizer": "(cls: 'type', name: 'str | None' = None, *, replace: 'bool' = False) -> 'None'",
    "ServerOptimizer": "(lr: 'float' = 1.0) -> 'None'",
    "Aggregator": None,  # the aggregation-rule interface: docs/api.md
    "AcceptedUpdate": "(node: int, payloads: dict[str, Payload], share: float, scale: float) -> None",
    "registered": "() -> 'list[PluginInfo]'",
    "PluginError": None,
    "UserData": "(x_train: 'np.ndarray', y_train: 'np.ndarray', x_test: 'np.ndarray', y_test: 'np.ndarray', "
                "num_classes: 'int | None' = None, groups: 'np.ndarray | None' = None) -> None",
    "Compressor": None,  # the compressor interface: docs/api.md and docs/compressors.md
    "CompressorOptions": None,
    "CompressionContext": None,
    "DensePayload": None,  # the payload kinds a compressor may return: docs/wire-format.md
    "SparsePayload": None,
    "QuantizedPayload": None,
    "SignPayload": None,
    "TernaryPayload": None,
    "LowRankPayload": None,
}
SCENARIO_METHODS = {
    "from_yaml": "(path: 'str | Path', overrides: 'Mapping[str, Any] | None' = None) -> 'Scenario'",
    "from_dict": "(tree: 'Mapping[str, Any]') -> 'Scenario'",
    "build": "(**keys: 'Any') -> 'Scenario'",
    "with_overrides": "(self, overrides: 'Mapping[str, Any]') -> 'Scenario'",
    "to_yaml": "(self) -> 'str'",
}


def test_the_public_names_and_signatures_are_the_promised_ones():
    assert sorted(fedgc.__all__) == sorted(PUBLIC)
    for name, signature in PUBLIC.items():
        value = getattr(fedgc, name)
        assert inspect.getdoc(value), f"fedgc.{name} has no docstring"
        if signature is not None:
            shown = str(inspect.signature(value)).replace('"', "'")
            assert shown.replace("'", "") == signature.replace("'", ""), f"fedgc.{name}{shown}"
    for name, signature in SCENARIO_METHODS.items():
        method = getattr(fedgc.Scenario, name)
        assert inspect.getdoc(method), f"fedgc.Scenario.{name} has no docstring"
        assert str(inspect.signature(method)).replace("'", "") == signature.replace("'", ""), name
    with pytest.raises(AttributeError):
        fedgc.run_point  # noqa: B018 — internals are not reached through the package


def test_the_version_is_the_one_in_pyproject_toml():
    """``fedgc.__version__`` is read from the installed package's metadata, which pyproject.toml sets: one
    source. (It is a module attribute, not one of the names ``from fedgc import *`` brings.)"""
    assert fedgc.__version__ == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert "__version__" not in fedgc.__all__ and "__version__" in dir(fedgc)


def test_import_fedgc_is_light():
    """``import fedgc`` loads neither torch nor Flower: the names load on first use."""
    code = "import sys, fedgc; print(sorted(m for m in ('torch', 'flwr', 'fedgc.scenario') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_scenarios_from_a_file_a_dict_keywords_and_overrides():
    quick = fedgc.Scenario.from_yaml(REPO / "scenarios" / "quickstart.yaml", {"rounds": 3})
    assert quick.rounds == 3 and quick.name == "quickstart"
    tiny = fedgc.Scenario.from_dict(TINY)
    assert fedgc.Scenario.build(**TINY) == tiny
    denser = tiny.with_overrides({"compression.density": 0.5, "seed": 4})
    assert (denser.compression.density, denser.seed, tiny.compression.density) == (0.5, 4, 0.1)
    assert fedgc.Scenario.from_dict(json.loads(json.dumps(tiny.model_dump(mode="json")))) == tiny
    assert "name: api-tiny" in tiny.to_yaml()


@pytest.mark.parametrize("bad, message", [
    ({"compression.densty": 0.1}, "compression.densty: unknown key (did you mean `density`?)"),
    ({"rounds": 0}, "rounds: "),
    ({"a.b.c.d.e.f.g.h.i": 1}, "a.b.c.d.e.f.g.h.i"),
])
def test_bad_input_is_one_line_of_scenario_error(bad, message):
    with pytest.raises(fedgc.ScenarioError) as err:
        fedgc.Scenario.from_dict(TINY).with_overrides(bad)
    assert message in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(fedgc.ScenarioError):
        fedgc.run({"name": "x"})  # rounds missing


def test_a_run_in_memory_is_the_command_lines_run(tmp_path):
    seen: list[fedgc.RoundRecord] = []
    memory = fedgc.run(TINY, on_round=seen.append)
    assert memory.out_dir is None and [r.round for r in seen] == [1, 2] and seen == memory.rounds
    (tmp_path / "tiny.yaml").write_text(fedgc.Scenario.from_dict(TINY).to_yaml())
    cli = subprocess.run([sys.executable, "-m", "fedgc", "run", str(tmp_path / "tiny.yaml"), "--out",
                          str(tmp_path / "cli"), "--quiet"], check=False, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    folder = fedgc.load_run(tmp_path / "cli")
    assert [asdict(r) for r in folder.rounds] == [asdict(r) for r in memory.rounds]  # wall-clock-free rows
    assert folder.clients == memory.clients and len(memory.clients) == 2 * 2
    assert {k: v for k, v in asdict(folder.summary).items() if k != "wall_time_s"} == \
           {k: v for k, v in asdict(memory.summary).items() if k != "wall_time_s"}
    model = memory.model
    assert all((model.state_dict()[k] == v).all() for k, v in folder.weights.items())
    frame = memory.to_pandas()
    assert list(frame["round"]) == [1, 2] and "bytes_up" in frame
    assert set(memory.to_pandas("clients")["outcome"]) <= {"applied", "skipped", "failed", "late", "cut"}


def test_a_run_folder_from_python_is_refused_when_it_holds_a_run(tmp_path):
    first = fedgc.run(TINY, out=tmp_path / "run")
    assert first.out_dir == tmp_path / "run" and (tmp_path / "run" / "summary.json").is_file()
    with pytest.raises(ValueError, match="holds"):
        fedgc.run(TINY, out=tmp_path / "run")
    again = fedgc.run(TINY, out=tmp_path / "run", overwrite=True)
    assert again.rounds == first.rounds


def test_a_sweep_over_two_seeds_gives_its_table_in_memory_and_on_disk(tmp_path):
    swept = fedgc.sweep(TINY, {"compression.density": [0.1, 0.5]}, seeds=[0, 1], out=tmp_path / "sweep")
    assert len(swept.runs) == 4 and [r.scenario.seed for r in swept.runs] == [0, 1, 0, 1]
    text = swept.table()
    assert text.count("\n| ") >= 2 and "±" in text and "n" in text.splitlines()[0]
    back = fedgc.load_sweep(tmp_path / "sweep")
    assert back.table() == text
    assert fedgc.report([tmp_path / "sweep"]) == text
    written = fedgc.plot(swept.runs, tmp_path / "plots")
    assert written and all(p.is_file() for p in written)
    memory = fedgc.sweep(TINY, seeds=[0, 1])
    assert memory.out_dir is None and all(r.out_dir is None for r in memory.runs)
    assert [r.label for r in memory.runs] == ["seed=0", "seed=1"]  # the point's name, kept in memory
    assert [r.rounds for r in memory.runs] == [r.rounds for r in swept.runs[:2]]


def test_a_sweep_kept_in_memory_names_its_rows_by_the_swept_values_as_on_disk(tmp_path):
    """The README's example: rows named ``compression.density=0.1``, not the scenario's name twice."""
    grid = {"compression.density": [0.1, 0.5]}
    in_memory = fedgc.sweep(TINY, grid).table()
    names = [line.split(" | ")[0].lstrip("| ") for line in in_memory.splitlines()[2:4]]
    assert names == ["compression.density=0.1", "compression.density=0.5"]
    assert in_memory == fedgc.sweep(TINY, grid, out=tmp_path / "sweep").table()  # what a sweep folder shows
    seeds = fedgc.sweep(TINY, grid, seeds=[0, 1]).table()  # seeds averaged: one row per swept value
    assert [line.split(" | ")[0].lstrip("| ") for line in seeds.splitlines()[2:4]] == names


def test_load_run_of_a_folder_that_is_not_a_run_is_one_line(tmp_path):
    with pytest.raises(ValueError) as err:
        fedgc.load_run(tmp_path)
    assert "not a run folder" in str(err.value) and "\n" not in str(err.value)


def test_the_extension_examples_in_docs_api_md_run_as_written():
    """The compressor and aggregation rule shown in docs/api.md, exactly as printed there, register and
    run: the page is a promise a reader will test."""
    import re

    import torch

    text = (REPO / "docs" / "api.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "class " in b]
    assert len(blocks) == 2
    namespace = {"fedgc": fedgc, "torch": torch}
    for block in blocks:
        exec(block, namespace)  # noqa: S102 — the documentation's own code
    fedgc.register_compressor(namespace["SignScale"], "docs_sign_scale")
    fedgc.register_aggregator(namespace["NormClippedMean"], "docs_norm_clipped_mean")
    run = fedgc.run({**TINY, "compression": {"name": "docs_sign_scale", "scale": 0.5},
                     "strategy": {"fraction": 1.0, "aggregation": "docs_norm_clipped_mean"}})
    assert run.summary.updates_applied == 8 and run.summary.clients_failed == 0
    with pytest.raises(fedgc.ScenarioError, match="scale"):
        fedgc.Scenario.from_dict({**TINY, "compression": {"name": "docs_sign_scale", "scale": "big"}})


def test_progress_in_a_notebook_is_a_tqdm_bar(monkeypatch, capsys):
    """``quiet=False`` in a Jupyter kernel (stderr not a terminal) shows a ``tqdm.auto`` bar, not the
    terminal's redrawn line; ``quiet=True`` shows nothing."""
    import types

    from fedgc.core.observe import NotebookProgress, ProgressObserver, default_observers

    assert [type(o) for o in default_observers(3, None, quiet=False, title="t", target_accuracy=0.9)] == \
        [ProgressObserver]  # IPython or ipykernel merely imported (pytest ran the notebooks) is no notebook
    shell = type("ZMQInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    shown = default_observers(3, None, quiet=False, title="t", target_accuracy=0.9)
    assert [type(o) for o in shown] == [ProgressObserver, NotebookProgress] and not shown[0].enabled
    assert [type(o) for o in default_observers(3, None, quiet=True, title="t", target_accuracy=0.9)] == [ProgressObserver]
    fedgc.run(TINY, quiet=False)
    assert "2/2" in capsys.readouterr().err  # the bar reached the last round


SCRIPT = '''
"""Written from docs/api.md alone: my model, my data, my compressor, a sweep over two seeds."""
import sys

import numpy as np
import torch
from pydantic import BaseModel
from torch import nn

import fedgc


class Net(nn.Module):
    class Options(BaseModel):
        hidden: int = 16

    def __init__(self, input_shape, num_classes, hidden=16):
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(input_shape)), hidden), nn.ReLU(),
                                    nn.Linear(hidden, num_classes))

    def forward(self, x):
        return self.layers(x)


class HalfSign(fedgc.Compressor):
    name = "half_sign"

    def compress(self, tensor, name, ctx):
        flat = tensor.detach().flatten().float()
        keep = torch.topk(flat.abs(), max(1, flat.numel() // 2)).indices.sort().values
        return fedgc.SparsePayload(keep, flat[keep], tuple(tensor.shape))


rng = np.random.default_rng(0)
x = rng.normal(size=(600, 2, 4)).astype(np.float32)
y = (x[:, 0, 0] + x[:, 1, 1] > 0).astype(np.int64)
np.savez(sys.argv[1], x_train=x[:500], y_train=y[:500], x_test=x[500:], y_test=y[500:])

fedgc.register_model("my_net", Net)
fedgc.register_dataset("my_blobs", fedgc.UserData.from_npz(sys.argv[1]))
fedgc.register_compressor(HalfSign)
scenario = fedgc.Scenario.build(name="mine", rounds=3, data={"dataset": "my_blobs", "num_clients": 4},
                                model={"name": "my_net", "options": {"hidden": 8}},
                                client={"local_steps": 5, "batch_size": 16, "lr": 0.2},
                                compression={"name": "half_sign"}, network={"profile": "3g"})
print(fedgc.sweep(scenario, seeds=[0, 1]).table())
'''


def test_a_script_written_from_the_docs_alone_runs_and_prints_its_table(tmp_path):
    (tmp_path / "mine.py").write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(tmp_path / "mine.py"), str(tmp_path / "data.npz")],
                         check=False, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    header, _, row = out.stdout.strip().splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert (cells["compressor"], cells["n"], cells["rounds"]) == ("half_sign", "2", "3"), out.stdout
    assert "±" in cells["final acc"] and 1.0 < float(cells["compression ratio"].rstrip("×")) < 2.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.npz", "mine.py"]  # no run folders left behind
