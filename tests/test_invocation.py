"""A command that a message tells its user to run runs as printed: it is written the way the user
started fedgc (``fedgc.invocation``). After ``make run`` the ``fedgc`` command is in ``.venv/bin``, not
on ``PATH``: a hint saying ``fedgc fetch mnist`` would fail with "command not found" when pasted."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

BIN = Path(sys.executable).parent
NEEDS_MNIST = str(REPO / "scenarios" / "dgc_mnist.yaml")
BARE_PATH = os.pathsep.join(p for p in ("/usr/bin", "/bin") if os.path.isdir(p))  # no fedgc on it

STARTS = {  # how the user started fedgc; PATH without (or with) this environment's bin
    "python -m fedgc": ([sys.executable, "-m", "fedgc", "check", NEEDS_MNIST], BARE_PATH),
    "python -m fedgc run": ([sys.executable, "-m", "fedgc.cli.run", NEEDS_MNIST, "--check"], BARE_PATH),
    "bin/fedgc by its path": ([str(BIN / "fedgc"), "check", NEEDS_MNIST], BARE_PATH),
    "fedgc on PATH": (["fedgc", "check", NEEDS_MNIST], f"{BIN}{os.pathsep}{BARE_PATH}"),
}


@pytest.mark.skipif(not (BIN / "fedgc").is_file(), reason="the fedgc command is not installed beside this Python "
                    "(pip install -e . puts it there; make test does)")
@pytest.mark.parametrize("start", sorted(STARTS))
def test_the_fetch_command_a_missing_data_set_names_runs_as_printed(tmp_path, start):
    argv, path = STARTS[start]
    env = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "FEDGC_SHARED_DIR")},
           "PATH": path, "FEDGC_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    failed = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
    printed = failed.stderr.rstrip().split("; get it with: ")[1]
    words = shlex.split(printed)
    assert words[-2:] == ["fetch", "mnist"], printed  # the default data directory: no --dir
    if start == "fedgc on PATH":
        assert words == ["fedgc", "fetch", "mnist"]  # the short form, only where it works
    else:
        assert words[0] != "fedgc", printed
    pasted = subprocess.run([*words, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert pasted.returncode == 0 and pasted.stdout.startswith("usage: fedgc fetch "), pasted.stderr
