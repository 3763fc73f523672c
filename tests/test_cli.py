"""The ``fedgc`` console script: it dispatches to fedgc.cli.run / fedgc.reports.run_reports / fedgc.fetch with the
arguments unchanged, and a fresh folder with only the scenarios runs after ``fedgc fetch``."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from fedgc import cli
from tests.conftest import REPO
from tests.test_fetch import make_mirror

FEDGC = Path(sys.executable).with_name("fedgc")


def fedgc(*args: str, cwd: Path | None = None, env: dict | None = None, drop: tuple[str, ...] = ()
          ) -> subprocess.CompletedProcess:
    if not FEDGC.is_file():
        pytest.fail(f"{FEDGC} missing: reinstall the package (pip install -e .) to get the console script")
    environ = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run([str(FEDGC), *args], capture_output=True, text=True, timeout=300, check=False,
                          cwd=cwd, env={**environ, **(env or {})})


@pytest.mark.parametrize(("argv", "module", "expected"), [
    (["run", "s.yaml", "--set", "rounds=2", "--out", "o"], "fedgc.cli.run", ["s.yaml", "--set", "rounds=2", "--out", "o"]),
    (["check", "s.yaml", "--set", "rounds=2"], "fedgc.cli.check", ["s.yaml", "--set", "rounds=2"]),
    (["report", "r1", "r2", "--format", "csv"], "fedgc.reports.run_reports", ["r1", "r2", "--format", "csv"]),
    (["fetch", "traces", "--dir", "d"], "fedgc.fetch", ["traces", "--dir", "d"]),
    (["export-data", "s.yaml", "--out", "d"], "fedgc.cli.export_data", ["s.yaml", "--out", "d"]),
])
def test_subcommands_pass_their_arguments_unchanged(monkeypatch, argv, module, expected):
    seen = []
    monkeypatch.setattr(f"{module}.main", lambda a: seen.append(a) or 7)
    assert cli.main(argv) == 7
    assert seen == [expected]


def test_help_and_unknown_commands():
    proc = fedgc("--help")
    assert proc.returncode == 0 and all(f"fedgc {c} " in proc.stdout for c in cli.COMMANDS)
    proc = fedgc("train", "x.yaml")
    assert proc.returncode == 2 and proc.stderr == ("fedgc: unknown command 'train' (expected one of: run, check, report, "
                                                    "fetch, export-data, submit, plugins, scenarios)\n")
    assert fedgc().returncode == 2


def test_an_old_python_gets_one_line(monkeypatch, capsys):
    monkeypatch.setattr(sys, "version_info", (3, 10, 4))
    assert cli.main(["run", "x.yaml"]) == 2
    assert capsys.readouterr().err == "fedgc: needs Python 3.11 or newer (this is Python 3.10.4)\n"
    # The module itself must parse on old Pythons for that message to be reachable.
    ast.parse((REPO / "fedgc" / "cli" / "__init__.py").read_text(), feature_version=(3, 7))


def test_requires_python_matches_the_check():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=" + ".".join(map(str, cli.MIN_PYTHON))
    assert project["scripts"] == {"fedgc": "fedgc.cli:main"}


@pytest.mark.slow
def test_check_run_and_report_through_the_console_script(tmp_path, tiny_scenario):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario))
    check = fedgc("check", str(scenario))
    assert check.returncode == 0 and check.stdout.startswith("ok: tiny: 4 clients"), check.stderr
    run = fedgc("run", str(scenario), "--out", str(tmp_path / "run"), "--quiet", "--set", "rounds=1")
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["rounds"] == 1
    report = fedgc("report", str(tmp_path / "run"), "--format", "csv")
    assert report.returncode == 0 and "tiny" in report.stdout, report.stderr
    plain = subprocess.run([sys.executable, "-m", "fedgc.reports.run_reports", str(tmp_path / "run"), "--format", "csv"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert plain.stdout == report.stdout  # the python -m form keeps working, with the same output


@pytest.mark.slow
def test_fetch_then_run_in_a_folder_without_the_shared_data(tmp_path):
    """The researcher's workflow: a folder with only the scenarios, the data fetched into D, a run."""
    mirror = make_mirror(tmp_path / "mirror")
    work, data = tmp_path / "work", tmp_path / "D"
    shutil.copytree(REPO / "scenarios", work / "scenarios")
    env = {"FEDGC_FETCH_MIRROR": mirror.as_uri(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for item in ("traces", "mnist"):
        proc = fedgc("fetch", item, "--dir", str(data), cwd=work, env=env)
        assert proc.returncode == 0 and f"{item}: " in proc.stdout, proc.stderr
    env = {"FEDGC_DATA_DIR": str(data), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = fedgc("run", "scenarios/mnist_lte_dropouts.yaml", "--set", "rounds=2", "--out", "run", "--quiet",
                cwd=work, env=env, drop=("FEDGC_TRACE_DIR", "FEDGC_SHARED_DIR"))
    assert run.returncode == 0, run.stderr
    summary = json.loads((work / "run" / "summary.json").read_text())
    assert summary["rounds"] == 2 and summary["updates_applied"] >= 1
    used = yaml.safe_load((work / "run" / "scenario.yaml").read_text())
    assert used["data"]["root"] == str(data / "mnist")
    assert used["network"]["trace_dir"] == str(data / "traces" / "mahimahi")
