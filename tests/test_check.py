"""``fedgc check`` (fedgc/cli/check.py) and the commands' help (issue 27): the check finds every file
without loading the training data unless ``--deep``; ``fedgc run --help`` and ``fedgc check --help``
describe their own command in plain text; ``fedgc --help`` and the README point fetch at one page."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from fedgc import cli
from fedgc.cli import check
from fedgc.cli.run import parse_args
from fedgc.invocation import as_invoked
from tests.conftest import REPO

QUICKSTART = str(REPO / "scenarios" / "quickstart.yaml")


def test_check_does_not_load_the_training_data_unless_deep(monkeypatch, capsys):
    import fedgc.core.parts
    import fedgc.data

    def loaded(*args, **kwargs):
        raise AssertionError("the training data was loaded")

    monkeypatch.setattr(fedgc.data, "load_federated", loaded)
    monkeypatch.setattr(fedgc.core.parts, "federated_data", loaded)
    assert check.main([QUICKSTART]) == 0
    assert capsys.readouterr().out.startswith("ok: quickstart: 10 clients, dataset digits")
    seen = []
    monkeypatch.setattr("fedgc.cli.run.main", lambda argv: seen.append(argv) or 0)
    assert check.main([QUICKSTART, "--deep", "--set", "rounds=2"]) == 0
    assert seen == [[QUICKSTART, "--set=rounds=2", "--check"]]


@pytest.mark.slow
def test_check_imports_no_data_loader_in_its_own_process():
    code = ("import sys; from fedgc.cli.check import main; code = main([%r]); "
            "print(code, sorted(m for m in ('sklearn', 'fedgc.runs.engines', 'fedgc.core.parts') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code % QUICKSTART], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stderr


def test_a_missing_data_set_is_found_without_loading_and_names_the_fetch_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDGC_DATA_DIR", str(tmp_path))
    assert check.main([str(REPO / "scenarios" / "dgc_mnist.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: data.root {tmp_path / 'mnist'}: no such directory")
    assert err.rstrip().endswith(f"get it with: {as_invoked('fetch')} mnist") and err.count("\n") == 1


def test_a_device_too_slow_for_one_round_is_refused_without_the_data(capsys):
    assert check.main([QUICKSTART, "--set", "network.device.samples_per_s=0.001",
                       "--set", "network.max_phase_s=10"]) == 2
    assert "one round's compute (160 samples)" in capsys.readouterr().err



def test_run_and_check_help_name_their_command_in_plain_text(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    run_help = capsys.readouterr().out
    with pytest.raises(SystemExit):
        check.parse_args(["--help"])
    check_help = capsys.readouterr().out
    assert run_help.startswith("usage: fedgc run ") and "Run a scenario" in run_help
    assert check_help.startswith("usage: fedgc check ") and "Check that a scenario is ready to run" in check_help
    for text in (run_help, check_help):
        assert "``" not in text and ":func:" not in text and not re.search(r"\bfedgc/\w+\.py\b", text), text


def test_fedgc_help_and_the_readme_point_fetch_at_the_same_page(capsys):
    assert cli.main(["--help"]) == 0
    fetch_line = next(line for line in capsys.readouterr().out.splitlines() if "fedgc fetch" in line)
    page = re.search(r"\((docs/[\w-]+\.md)\)", fetch_line).group(1)
    readme = (REPO / "README.md").read_text()
    assert f"[{page}]({page}) — `fedgc fetch`" in readme
