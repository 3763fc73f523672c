"""Errors that say the fix (issue 27): a misspelt key names the closest valid one, a YAML syntax
error shows its line, column, text and what the parser expected, and a missing data set or trace
names the ``fedgc fetch`` command that gets it."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from fedgc.cli.run import main
from fedgc.data.mnist import load_mnist_dir
from fedgc.fetch.hint import fetch_command
from fedgc.invocation import as_invoked
from fedgc.scenario.model import ScenarioError, load_scenario, load_tree, validate

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"


@pytest.mark.parametrize(("path", "expected"), [
    (("compression", "densty"), "compression.densty: unknown key (did you mean `density`?)"),
    (("clinet",), "clinet: unknown key (did you mean `client`?)"),
    (("eval", "target_acuracy"), "eval.target_acuracy: unknown key (did you mean `target_accuracy`?)"),
    (("data", "num_client"), "data.num_client: unknown key (did you mean `num_clients`?)"),
    (("network", "device", "samples_per_sec"),
     ("network.device.samples_per_sec: not a key of device constant (did you mean `samples_per_s`? its keys: "
      "name, samples_per_s)")),
])
def test_an_unknown_key_suggests_the_closest_valid_one(path, expected):
    tree = copy.deepcopy(load_tree(QUICKSTART))
    section = tree
    for part in path[:-1]:
        section = section.setdefault(part, {})
    section[path[-1]] = 1
    with pytest.raises(ScenarioError) as err:
        validate(tree)
    assert str(err.value) == expected


def test_an_unknown_key_with_nothing_close_lists_the_keys_of_its_section():
    tree = load_tree(QUICKSTART)
    tree["eval"]["zzz"] = 1
    with pytest.raises(ScenarioError, match=r"^eval.zzz: unknown key \(the keys here: batch_size, every, "):
        validate(tree)


@pytest.mark.parametrize(("text", "expected"), [
    ("name: x\ndata: {dataset: digits\nseed: 1\n",
     ("invalid YAML at line 3, column 5: expected ',' or '}', but got ':' (while parsing a flow mapping started at "
      "line 2): 'seed: 1'")),
    ("name: x\nclient:\n  lr: 0.1\n   batch_size: 3\n",
     "invalid YAML at line 4, column 14: mapping values are not allowed here: 'batch_size: 3'"),
    ("name: x\n\tseed: 1\n", ("invalid YAML at line 2, column 1: found character '\\t' that cannot start any "
                              "token (YAML indents with spaces, not tabs): 'seed: 1'")),
])
def test_a_yaml_syntax_error_shows_the_line_and_what_the_parser_expected(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        load_tree(path)
    assert str(err.value) == f"{path}: {expected}"


def test_the_fetch_command_for_a_missing_path(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDGC_DATA_DIR", str(tmp_path / "data"))
    fetch = as_invoked("fetch")  # fedgc fetch, as this process was started (tests/test_invocation.py)
    assert fetch_command(tmp_path / "data" / "mnist") == f"{fetch} mnist"  # the default folder: no --dir
    assert fetch_command(tmp_path / "elsewhere" / "leaf-shakespeare") == \
        f"{fetch} shakespeare --dir {tmp_path / 'elsewhere'}"
    assert fetch_command(tmp_path / "t" / "traces" / "mahimahi" / "ATT-LTE-driving-2016.down") == \
        f"{fetch} traces --dir {tmp_path / 't'}"
    assert fetch_command(tmp_path / "data" / "fashion_mnist" / "train-images-idx3-ubyte.gz") == \
        f"{fetch} fashion-mnist"
    assert fetch_command(tmp_path / "my-own-data.npz") is None


def test_a_missing_dataset_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDGC_DATA_DIR", str(tmp_path))
    fetch = re.escape(as_invoked("fetch"))
    with pytest.raises(ValueError, match=rf"no such directory .*; get it with: {fetch} mnist$"):
        load_mnist_dir(tmp_path / "mnist")
    (tmp_path / "mnist").mkdir()
    with pytest.raises(ValueError, match=rf"missing train-images-idx3-ubyte.gz, .*; get it with: {fetch} mnist$"):
        load_mnist_dir(tmp_path / "mnist")


def test_a_missing_trace_names_the_fetch_command_on_the_command_line(tmp_path, monkeypatch, capsys):
    tree = load_tree(QUICKSTART)
    tree["network"] = {"profile": "lte", "trace_dir": str(tmp_path / "traces" / "mahimahi"),
                       "link": {"name": "trace", "down": ["ATT-LTE-driving-2016.down"]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tree))
    with pytest.raises(ScenarioError, match=rf"no such file; get it with: {re.escape(as_invoked('fetch'))} traces --dir "):
        load_scenario(path)
    assert main([str(path), "--check"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"get it with: {as_invoked('fetch')} traces --dir {tmp_path}")
