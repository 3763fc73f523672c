"""The JVM SuperNode as a library an app embeds (``fedgc.supernode.LifecycleCheck``, test code, against a
real insecure ``flower-superlink`` on 127.0.0.1, no ``Main``): every log line goes to the logger the app
installs and none to standard error; ``requestStop()`` before ``run()`` returns at once; ``run()`` in a
thread registers, and ``requestStop()`` deactivates, unregisters and returns 0; a SuperNode runs once
(a second ``run()`` throws); a new SuperNode (fresh self-registered key) connects again; a node retrying an
unreachable SuperLink stops on request."""

from __future__ import annotations

import os
import subprocess

import pytest

from fedgc.flower.runtime.runtime_processes import flower_env, free_port, start_superlink

from .test_jvm_client import JAR, TESTS_JAR, jar  # noqa: F401  (the fixture: make jvm, or skip)

pytestmark = pytest.mark.jvm


def test_supernode_start_stop_restart_and_logger(tmp_path, jar):  # noqa: F811
    env = flower_env(tmp_path / "flwr-home")
    port = free_port()
    link = start_superlink(port, tmp_path, env, simulation=False)
    try:
        result = subprocess.run(["java", "-cp", f"{JAR}{os.pathsep}{TESTS_JAR}", "fedgc.supernode.LifecycleCheck",
                                 f"127.0.0.1:{port}", str(tmp_path)], capture_output=True, text=True, timeout=180,
                                check=False)
    finally:
        link.stop()
    assert result.returncode == 0 and result.stdout.startswith("lifecycle ok"), result.stdout + result.stderr
    assert result.stderr == "", result.stderr  # a library logs only through the app's logger
    print(result.stdout)
