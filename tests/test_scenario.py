"""Scenario files: unknown keys, wrong types and out-of-range values are one-line errors, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from fedgc.scenario.model import ScenarioError, load_scenario, parse_override, validate
from tests.conftest import REPO

REQUIRED_KEYS = ["name", "seed", "rounds", "engine", "data.dataset", "data.root", "data.num_clients",
                 "data.partition", "client.local_steps", "client.batch_size", "client.lr", "compression.name",
                 "compression.density", "strategy.fraction", "network.profile", "eval.target_accuracy"]


def test_every_documented_key_exists(tiny_scenario):
    dumped = validate(tiny_scenario).model_dump()
    for key in REQUIRED_KEYS:
        node = dumped
        for part in key.split("."):
            assert part in node, key
            node = node[part]


@pytest.mark.parametrize("override, field", [
    ("colour=blue", "colour"),
    ("data.colour=blue", "data.colour"),
    ("rounds=three", "rounds"),
    ("rounds=0", "rounds"),
    ("compression.density=1.5", "compression.density"),
    ("compression.name=zip", "compression.name"),
    ("network.profile=carrier-pigeon", "network.profile"),
    ("data.dataset=imagenet", "data.dataset"),
])
def test_invalid_values_name_the_field(tmp_path, tiny_scenario, override, field):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, [override])
    message = str(err.value)
    assert message.startswith(field + ":")
    assert "\n" not in message


def test_overrides_parse_yaml_values():
    assert parse_override("compression.density=1e-3") == ("compression.density", 0.001)
    assert parse_override("network.deadline_s=null") == ("network.deadline_s", None)
    assert parse_override("name=abc") == ("name", "abc")
    with pytest.raises(ScenarioError):
        parse_override("no-equals-sign")


@pytest.mark.slow
@pytest.mark.parametrize("content, needle", [
    ("rounds: [", "invalid YAML"),
    ("", "empty scenario file"),
    ("- a\n- b\n", "mapping"),
    ("name: x\nrounds: 2\nbogus: 1\n", "bogus: unknown key"),
    ("name: x\nrounds: many\n", "rounds:"),
])
def test_cli_exits_2_with_one_line(tmp_path, content, needle):
    path = tmp_path / "s.yaml"
    path.write_text(content)
    proc = subprocess.run([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_cli_missing_file_and_directory(tmp_path):
    for target in (tmp_path / "nope.yaml", tmp_path):
        proc = subprocess.run([sys.executable, "-m", "fedgc.cli.run", str(target)], capture_output=True, text=True,
                              cwd=REPO, timeout=120, check=False)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
