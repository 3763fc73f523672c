"""Under ``CI=true`` a skip fails the run unless tests/conftest.py's TOLERATED_SKIPS lists its reason:
CI must not pass with the netns, deployment or JVM tests skipped for want of root, iproute2, ssh-keygen
or a JDK. The list is printed at the end of a CI session with the skips it let through; without
``CI=true`` every skip stays a skip. Checked by running pytest on a small test file with this suite's
conftest as its plugin, as CI would."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO, TOLERATED_SKIPS, tolerated_by

TESTS = '''
import pytest

def test_runs():
    pass

def test_needs_a_gpu():
    pytest.skip("needs a CUDA GPU")  # on the tolerated list

@pytest.mark.skipif(True, reason="needs root and iproute2 (ip netns)")  # a missing system tool
def test_needs_namespaces():
    pass

@pytest.fixture
def jdk():
    pytest.skip("needs a JDK, protoc and protobuf-java (javac missing)")

def test_needs_a_jdk(jdk):
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    assert False
'''


def run_pytest(tmp_path, ci: str | None, files: dict[str, str]) -> subprocess.CompletedProcess:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-p", "tests.conftest", *files], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def outcome(out: str, test: str) -> str:
    """PASSED, ERROR, FAILED or XFAIL: the ``-rA`` summary line that names ``test`` (a skip's names its line)."""
    (line,) = [line for line in out.splitlines() if re.match(rf"[A-Z]+ test_tiny\.py::{test}( |$)", line)]
    return line.split(" ")[0]


@pytest.mark.parametrize("ci", ["true", "1", "TRUE"])
def test_under_ci_only_a_tolerated_skip_is_a_skip(tmp_path, ci):
    done = run_pytest(tmp_path, ci, {"test_tiny.py": TESTS})
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert "1 passed, 1 skipped, 1 xfailed, 2 errors" in out, out[-3000:]
    assert outcome(out, "test_runs") == "PASSED" and outcome(out, "test_known_bug") == "XFAIL"
    assert outcome(out, "test_needs_namespaces") == "ERROR" and outcome(out, "test_needs_a_jdk") == "ERROR"
    assert re.search(r"^SKIPPED \[1\] test_tiny\.py:\d+: needs a CUDA GPU$", out, re.MULTILINE), out[-3000:]
    # Each failure says why: the skip's own reason and where the tolerated ones are listed.
    assert "does not list: needs root and iproute2 (ip netns)" in out
    assert "does not list: needs a JDK, protoc and protobuf-java (javac missing)" in out
    # The printed list: every tolerated pattern with its reason, then the skips it let through here.
    summary = out.split("skips CI=true tolerates (tests/conftest.py TOLERATED_SKIPS)", 1)[1]
    for pattern, why in TOLERATED_SKIPS:
        assert f"{pattern!r}: {why}" in summary
    assert "tolerated in this session: 1\n  test_tiny.py::test_needs_a_gpu ('needs a CUDA GPU')" in summary


def test_under_ci_a_module_that_skips_as_a_whole_fails(tmp_path):
    module = 'import pytest\npytest.skip("openssh-client is not installed", allow_module_level=True)\n'
    done = run_pytest(tmp_path, "true", {"test_whole.py": module, "test_tiny.py": TESTS})
    assert done.returncode != 0, done.stdout[-3000:]
    assert "does not list: openssh-client is not installed" in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize("ci", [None, "false", ""])
def test_without_ci_every_skip_stays_a_skip(tmp_path, ci):
    done = run_pytest(tmp_path, ci, {"test_tiny.py": TESTS})
    out = done.stdout
    assert done.returncode == 0, out[-3000:]
    assert "1 passed, 3 skipped, 1 xfailed" in out, out[-3000:]
    assert "TOLERATED_SKIPS" not in out


def test_the_tolerated_skips_are_the_ones_listed():
    # The reasons this suite's own tolerated skips give, as their tests word them.
    assert tolerated_by("needs a CUDA GPU") and tolerated_by("this machine has CUDA")
    assert tolerated_by("this machine has a GPU")
    assert tolerated_by("pid 2 is not the kernel's thread daemon here (a pid namespace)")
    # What CI must have: each of these skip reasons (as the suite words them) fails a CI run.
    for reason in ("needs openssl and ssh-keygen", "reads /proc", "cannot mount a tmpfs here (permission denied)",
                   "needs root: ip netns", "engine flower needs Ray: pip install 'fedgc[ray]'",
                   "needs a JDK, protoc and protobuf-java (javac missing)", "the tensorboard extra is not installed",
                   "../shared/data/mnist not found; get it with: fedgc fetch mnist --dir ../shared/data"):
        assert tolerated_by(reason) is None, reason
    assert all(why.strip() for _, why in TOLERATED_SKIPS)
