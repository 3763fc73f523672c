"""Deployed clients train on their own data: ``DATA_DIR/train.npz`` (x, y), named by the node config
``data-dir``, used instead of the simulated partition; malformed files are one-line errors.

The proof on a real deployment: two ``flower-supernode``s, each holding a different file written by
``fedgc export-data`` from a *Dirichlet* split, join a run whose scenario says *iid*; the run learns
exactly what the inline simulation of the Dirichlet split learns (same accuracy and training loss
every round), not what the iid split would. The server never sees the devices' data.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import yaml

from fedgc.core.parts import federated_data
from fedgc.data import ArrayDataset
from fedgc.data.base import DataFileError
from fedgc.data.device_files import check_fits, load_device_data, save_device_data
from fedgc.runs.engines import run_scenario
from fedgc.scenario.model import validate

from .test_deployment import SCENARIO, local_deployment, submit

X = np.arange(24, dtype=np.float32).reshape(4, 1, 2, 3)
Y = np.array([0, 1, 2, 1])


def test_save_then_load_gives_the_same_examples(tmp_path):
    path = save_device_data(ArrayDataset(X, Y.astype(np.int32)), tmp_path / "device")
    assert path == tmp_path / "device" / "train.npz" and [p.name for p in path.parent.iterdir()] == ["train.npz"]
    with zipfile.ZipFile(path) as npz:  # language-neutral: a zip of two .npy files
        assert sorted(npz.namelist()) == ["x.npy", "y.npy"]
    loaded = load_device_data(tmp_path / "device")
    assert loaded.x.dtype == np.float32 and np.array_equal(loaded.x, X)
    assert loaded.y.dtype == np.int64 and np.array_equal(loaded.y, Y)


def _write(path, **arrays):
    path.mkdir(parents=True, exist_ok=True)
    np.savez(path / "train.npz", **arrays)


@pytest.mark.parametrize(("arrays", "message"), [
    (None, "does not exist"),
    ({"x": X}, "no y array"),
    ({"x": X.astype(np.float64), "y": Y}, "x is float64"),
    ({"x": X, "y": Y[:3]}, "4 examples but y has 3 labels"),
    ({"x": X, "y": Y.astype(np.float32)}, "integer labels"),
    ({"x": X, "y": -Y}, "negative label"),
    ({"x": np.full_like(X, np.nan), "y": Y}, "NaN"),
    ({"x": X[:0], "y": Y[:0]}, "no examples"),
    ({"x": X[:, 0, 0, 0], "y": Y}, "expected (n, *input_shape)"),
])
def test_a_malformed_device_file_is_a_one_line_error(tmp_path, arrays, message):
    if arrays is not None:
        _write(tmp_path, **arrays)
    with pytest.raises(DataFileError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")) as err:
        load_device_data(tmp_path)
    assert "\n" not in str(err.value)


def test_a_file_that_is_not_an_npz_is_a_one_line_error(tmp_path):
    (tmp_path / "train.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DataFileError, match=r"not a readable .npz"):
        load_device_data(tmp_path)


def test_examples_must_fit_the_model_in_the_message():
    data = ArrayDataset(X, Y)
    check_fits(data, (1, 2, 3), 3, "d")
    with pytest.raises(DataFileError, match=r"shape \(1, 2, 3\), but the model takes \(1, 8, 8\)"):
        check_fits(data, (1, 8, 8), 10, "d")
    with pytest.raises(DataFileError, match="label 2 out of range for 2 classes"):
        check_fits(data, (1, 2, 3), 2, "d")


@pytest.mark.slow
def test_export_data_refuses_a_folder_holding_files_unless_overwrite_replaces_an_earlier_export(tmp_path, capsys):
    from fedgc.cli.export_data import main as export_data

    scenario_file = tmp_path / "s.yaml"
    scenario_file.write_text("name: s\nrounds: 1\ndata: {dataset: digits, num_clients: 3}\nmodel: {name: mlp}\n")
    out = tmp_path / "out"
    command = [str(scenario_file), "--out", str(out)]
    assert export_data([*command, "--partition", "2"]) == 0
    assert export_data([*command, "--partition", "1"]) == 2
    assert capsys.readouterr().err.startswith(f"error: --out {out} already holds files")
    assert [p.name for p in out.iterdir()] == ["partition-2"]
    assert export_data([*command, "--partition", "1", "--overwrite"]) == 0
    assert [p.name for p in out.iterdir()] == ["partition-1"]
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert export_data([*command, "--overwrite"]) == 2
    assert "holds 'notes.txt', not an export" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine" and (out / "partition-1").is_dir()


def test_export_data_writes_the_simulated_partitions(tmp_path):
    scenario_file = tmp_path / "s.yaml"
    scenario_file.write_text("name: s\nrounds: 1\ndata: {dataset: digits, num_clients: 3, partition: dirichlet}\n"
                             "model: {name: mlp}\n")
    command = [sys.executable, "-m", "fedgc.cli.export_data", str(scenario_file), "--out", str(tmp_path / "out")]
    proc = subprocess.run([*command, "--partition", "2"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["partition-2"]
    expected = federated_data(validate({"name": "s", "rounds": 1, "model": {"name": "mlp"},
                                        "data": {"dataset": "digits", "num_clients": 3, "partition": "dirichlet"}}))
    exported = load_device_data(tmp_path / "out" / "partition-2")
    assert np.array_equal(exported.x, expected.partitions[2].x) and np.array_equal(exported.y, expected.partitions[2].y)
    proc = subprocess.run([*command, "--partition", "3"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stderr == "error: partition 3 out of range: the scenario has partitions 0..2\n"


DIRICHLET = {"data.partition": "dirichlet", "data.alpha": 0.3}


def _with(tree: dict, dotted: dict) -> dict:
    out = {**tree, "data": dict(tree["data"])}
    for key, value in dotted.items():
        out["data"][key.split(".", 1)[1]] = value
    return out


@pytest.mark.deployment
def test_two_supernodes_train_on_their_own_files(tmp_path, flower_app):
    scenario = {**SCENARIO, "rounds": 2}
    skewed = _with(scenario, DIRICHLET)
    files = tmp_path / "devices"
    tree = tmp_path / "skewed.yaml"
    tree.write_text(yaml.safe_dump(skewed))
    proc = subprocess.run([sys.executable, "-m", "fedgc.cli.export_data", str(tree), "--out", str(files)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    sizes = [len(load_device_data(files / f"partition-{p}")) for p in (0, 1)]
    assert sizes[0] != sizes[1]  # two different files

    with local_deployment(tmp_path, data_dirs=[files / f"partition-{p}" for p in (0, 1)]) as running:
        (tmp_path / "deployed").mkdir()
        summary, rows = submit(scenario, tmp_path / "deployed", running, flower_app)  # the server's scenario: iid
    assert summary["updates_applied"] == 4 and summary["clients_failed"] == 0

    deployed = [(r["accuracy"], r["train_loss"]) for r in rows]
    assert deployed == inline_rows(skewed, tmp_path / "inline-skewed")
    assert deployed != inline_rows(scenario, tmp_path / "inline-iid")


def inline_rows(tree: dict, out) -> list[tuple]:
    run_scenario(validate(tree), out, quiet=True)
    return [(row["accuracy"], row["train_loss"])
            for row in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]
