"""Reading a scenario or a run never runs the user's code; running it does, in one line when it fails.

``fedgc check`` (without ``--deep``), ``fedgc.load_run`` and the refusals of ``--resume`` check a
plugin (an import path) by its name only: its module is never imported, whatever it would do. The
plugin module here writes a marker file when imported, then raises ``SystemExit(0)``: a command that
imported it would leave the marker, and one that let the exit through would end with status 0 and
print nothing. ``--deep`` says it runs the plugins, and what they raise (``SystemExit`` included) is
one line naming the plugin, exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

import fedgc
from fedgc.cli import check
from fedgc.cli.run import main as simulate
from fedgc.scenario.yaml12 import dump as yaml_dump
from fedgc.scenario.yaml12 import load as yaml_load

pytestmark = pytest.mark.usefixtures("isolated_registries")

TINY = {"name": "reads", "seed": 3, "rounds": 2,
        "data": {"dataset": "digits", "num_clients": 2, "partition": "iid"},
        "model": {"name": "mlp", "options": {"hidden": [8]}},
        "client": {"local_steps": 1, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "topk", "density": 0.1}, "checkpoint_every": 1}

EXITS_ON_IMPORT = '''
import pathlib
pathlib.Path(__file__).with_name("imported").write_text("the plugin ran")
raise SystemExit(0)
'''

RAISES_WHEN_CALLED = '''
import pathlib

import fedgc


def broken_data():
    pathlib.Path(__file__).with_name("called").write_text("the data set ran")
    raise RuntimeError("the data set's own bug")


def exits_data():
    raise SystemExit(3)


def digits_data():
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    return fedgc.UserData(x[:40], y[:40], x[40:], y[40:])


def broken_model(input_shape, num_classes):
    raise ValueError("the model's own bug")
'''


def plugin_names(module: str) -> dict:
    """Every place a scenario names a plugin, each naming ``module``."""
    return {"model": {"name": f"{module}:Net", "options": {"width": 3}},
            "compression": {"name": f"{module}:Comp", "density": 0.1, "own_knob": 4, "warmup_for": [f"{module}:Comp"]},
            "strategy": {"aggregation": f"{module}:Rule", "server_optimizer": f"{module}:Step",
                         "server_optimizer_options": {"factor": 2}}}


@pytest.fixture
def folder(tmp_path):
    """A scenario folder that ships ``evil_plugin.py`` (a module name unique to the test) beside it."""
    module = f"evil_plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(EXITS_ON_IMPORT)
    return tmp_path, module


def test_check_beside_a_plugin_module_never_imports_it(folder):
    """``python -m fedgc check`` from the scenario's folder (the working directory is then first on
    sys.path): the scenario names the module everywhere a plugin goes, and a ``yaml.py`` lies there
    too; neither is imported, and the line says which plugins were checked by name only."""
    where, module = folder
    (where / "yaml.py").write_text(EXITS_ON_IMPORT)
    (where / "s.yaml").write_text(yaml_dump({**TINY, **plugin_names(module)}))
    out = subprocess.run([sys.executable, "-m", "fedgc", "check", "s.yaml"], cwd=where, capture_output=True,
                         text=True, timeout=300, check=False,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert not (where / "imported").exists()
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("ok: reads: 2 clients") and line.count("\n") == 0
    assert (f"plugins checked by name only, not imported: model {module}:Net, compressor {module}:Comp, "
            f"aggregator {module}:Rule, server_optimizer {module}:Step (--deep imports and runs them)") in line


def test_check_in_process_reads_only_and_still_refuses_what_it_can_tell(folder, monkeypatch, capsys):
    where, module = folder
    monkeypatch.syspath_prepend(str(where))
    tree = {**TINY, **plugin_names(module)}
    (where / "s.yaml").write_text(yaml_dump(tree))
    assert check.main([str(where / "s.yaml")]) == 0
    assert module not in sys.modules and not (where / "imported").exists()
    capsys.readouterr()
    tree["compression"]["value_dtype"] = "fp8"  # a common compressor option: checked without the plugin
    (where / "s.yaml").write_text(yaml_dump(tree))
    assert check.main([str(where / "s.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: compression.value_dtype: Input should be 'fp32', 'fp16', 'int8', 'int4' or 'sign'")
    assert err.count("\n") == 1
    assert module not in sys.modules


def test_deep_imports_the_plugins_and_an_exit_on_import_is_one_line_exit_2(folder, monkeypatch, capsys):
    where, module = folder
    monkeypatch.syspath_prepend(str(where))
    (where / "s.yaml").write_text(yaml_dump({**TINY, "model": {"name": f"{module}:Net"}}))
    assert check.main([str(where / "s.yaml"), "--deep"]) == 2
    err = capsys.readouterr().err
    assert (where / "imported").exists()  # --deep runs the plugins: it says so
    assert err == f"error: model '{module}:Net': importing {module} raised SystemExit: 0\n"


@pytest.mark.parametrize("dataset, message", [
    ("broken_data", "dataset '{m}:broken_data' raised RuntimeError: the data set's own bug"),
    ("exits_data", "dataset '{m}:exits_data' raised SystemExit: 3"),
])
def test_deep_a_dataset_that_raises_or_exits_is_one_line_naming_it(tmp_path, monkeypatch, capsys, dataset, message):
    module = f"user_data_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(RAISES_WHEN_CALLED)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "s.yaml").write_text(yaml_dump({**TINY, "data": {"dataset": f"{module}:{dataset}", "num_clients": 2}}))
    assert check.main([str(tmp_path / "s.yaml"), "--deep"]) == 2
    assert capsys.readouterr().err == "error: " + message.replace("{m}", module) + "\n"


def test_deep_a_model_builder_that_raises_is_one_line_and_the_output_names_the_plugins_run(tmp_path, monkeypatch,
                                                                                         capsys):
    module = f"user_parts_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(RAISES_WHEN_CALLED)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = {"dataset": f"{module}:digits_data", "num_clients": 2}
    (tmp_path / "s.yaml").write_text(yaml_dump({**TINY, "data": data, "model": {"name": f"{module}:broken_model"}}))
    assert check.main([str(tmp_path / "s.yaml"), "--deep"]) == 2
    assert capsys.readouterr().err == f"error: model '{module}:broken_model' raised ValueError: the model's own bug\n"
    (tmp_path / "s.yaml").write_text(yaml_dump({**TINY, "data": data, "model": {"name": "logreg"}}))
    assert check.main([str(tmp_path / "s.yaml"), "--deep"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"; plugins imported and run: dataset {module}:digits_data")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run folder of a built-in scenario (its checkpoint after round 1), written once."""
    out = tmp_path_factory.mktemp("runs") / "done"
    fedgc.run(TINY, out=out)
    return out


def copy_run(finished_run, tmp_path):
    target = tmp_path / "run"
    shutil.copytree(finished_run, target)
    return target


def test_load_run_of_a_folder_naming_a_plugin_never_imports_it(finished_run, folder):
    where, module = folder
    run_dir = copy_run(finished_run, where)
    tree = yaml_load((run_dir / "scenario.yaml").read_text())
    tree["model"] = {"name": f"{module}:Net", "options": {"width": 3}}
    (run_dir / "scenario.yaml").write_text(yaml_dump(tree))
    sys.path.insert(0, str(where))
    try:
        run = fedgc.load_run(run_dir)
    finally:
        sys.path.remove(str(where))
    assert not (where / "imported").exists() and module not in sys.modules
    assert run.scenario.model.name == f"{module}:Net" and run.scenario.unchecked_plugins == (f"model {module}:Net",)
    assert run.scenario.model.options == {"width": 3}  # kept as written: only the plugin could check it
    assert run.weights.keys() == torch.load(run_dir / "model.pt", weights_only=True).keys()  # unchecked: bounded only


@pytest.mark.parametrize("change, message", [
    (lambda w: {**w, "extra.weight": torch.zeros(2)}, "an unknown tensor extra.weight"),
    (lambda w: dict(list(w.items())[1:]), "no tensor "),
    (lambda w: {k: torch.zeros(3, 3) if i == 0 else v for i, (k, v) in enumerate(w.items())}, "has shape (3, 3)"),
    (lambda w: {k: v.double() for k, v in w.items()}, "is float64, the model's is float32"),
])
def test_load_run_checks_model_pt_against_the_scenarios_model(finished_run, tmp_path, change, message):
    run_dir = copy_run(finished_run, tmp_path)
    weights = torch.load(run_dir / "model.pt", weights_only=True)
    assert fedgc.load_run(run_dir).weights.keys() == weights.keys()
    torch.save(change(weights), run_dir / "model.pt")
    with pytest.raises(fedgc.RunFolderError) as err:
        fedgc.load_run(run_dir)
    assert "not the scenario's model" in str(err.value) and message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_load_run_refuses_a_model_pt_far_larger_than_the_model_unread(finished_run, tmp_path):
    run_dir = copy_run(finished_run, tmp_path)
    with (run_dir / "model.pt").open("ab") as f:
        f.truncate(64 * 1024 * 1024)  # a sparse 64 MiB: the model holds a few thousand parameters
    with pytest.raises(fedgc.RunFolderError, match=r"model.pt: larger than \d+ bytes \(the scenario's model is smaller\)"):
        fedgc.load_run(run_dir)


def test_resume_without_a_checkpoint_is_refused_before_an_edited_plugin_is_imported(finished_run, folder, monkeypatch,
                                                                                   capsys):
    where, module = folder
    monkeypatch.syspath_prepend(str(where))
    run_dir = copy_run(finished_run, where)
    (run_dir / "checkpoint.pt").unlink()
    tree = yaml_load((run_dir / "scenario.yaml").read_text())
    tree["model"] = {"name": f"{module}:Net"}
    (run_dir / "scenario.yaml").write_text(yaml_dump(tree))
    assert simulate(["--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint.pt in that folder" in err and err.count("\n") == 1
    assert not (where / "imported").exists() and module not in sys.modules


def test_resume_of_a_scenario_edited_to_name_a_plugin_is_refused_before_importing_it(finished_run, folder,
                                                                                     monkeypatch, capsys):
    where, module = folder
    monkeypatch.syspath_prepend(str(where))
    run_dir = copy_run(finished_run, where)
    tree = yaml_load((run_dir / "scenario.yaml").read_text())
    tree["rounds"] = 3
    tree["strategy"]["aggregation"] = f"{module}:Rule"
    (run_dir / "scenario.yaml").write_text(yaml_dump(tree))
    assert simulate(["--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --resume {run_dir}: scenario.yaml differs from the scenario of the checkpoint "
                          "in strategy.aggregation") and err.count("\n") == 1
    assert not (where / "imported").exists() and module not in sys.modules
