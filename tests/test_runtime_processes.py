"""Finding and stopping every process a Flower runtime started, including the ones its environment
marker does not reveal: Ray rewrites some processes' titles over their environment block (seen on
``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent``), and their parents die first."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from fedgc.runs.process_tree import RUNTIME_TOKEN, Family, terminate, token_holders

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")

# A parent that starts a child without the token in its environment (as Ray's title rewrite leaves
# it), prints the child's pid and waits; the child ignores SIGTERM, as a busy worker may.
PARENT = """
import os, subprocess, sys
env = {k: v for k, v in os.environ.items() if k != "FEDGC_RUNTIME_TOKEN"}
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"], env=env)
print(child.pid, flush=True)
child.wait()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def test_a_family_read_before_the_clean_up_keeps_an_orphan_without_the_token():
    token = "t" + os.urandom(8).hex()
    parent = subprocess.Popen([sys.executable, "-c", PARENT], env={**os.environ, RUNTIME_TOKEN: token},
                              stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    try:
        family = Family([parent.pid])
        assert family.members() == sorted([parent.pid, child])
        assert token_holders(token) == [parent.pid], "the child does not carry the token"
        parent.kill()
        parent.wait()
        assert token_holders(token) == [] and _alive(child), "an orphan the token no longer finds"
        assert family.members() == [child]
        started = time.monotonic()
        assert terminate(family.members, grace_s=1.0) == []
        assert not _alive(child) and time.monotonic() - started < 30
        assert family.members() == []
    finally:
        for pid in (parent.pid, child):
            if _alive(pid):
                os.kill(pid, 9)
