"""A test that skips for want of the downloaded data says how to get it: the ``fedgc fetch`` command
(as it runs here) that puts the files where the tests read them, and ``FEDGC_SHARED_DIR``, the
variable they read (tests/conftest.py, ``get_shared``). Run here with an empty shared folder, every
kind of such skip: the conftest fixtures, ``skipif`` marks, a module fixture and skips in a test."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

from tests.conftest import REPO

NEEDING_DATA = [
    "tests/test_network_build.py::test_trace_links_round_robin_over_files",  # the shared_dir fixture
    "tests/test_scenarios_valid.py::test_a_bundled_scenario_checks_from_another_directory",  # mnist_root
    "tests/test_data.py::test_mnist_loader_reads_the_shared_files",  # skipif marks
    "tests/test_data.py::test_leaf_shakespeare_keeps_each_users_data_together",
    "tests/test_data.py::test_shared_data_is_not_written",
    "tests/test_partition_scale.py::test_10k_mnist_clients_shards",  # a module-scoped fixture
    "tests/test_fetch.py::test_fetch_from_a_file_mirror_is_checked_and_idempotent",  # the mirror of the shared folder
    "tests/test_fetch.py::test_every_shared_trace_file_is_listed_with_its_sha256",  # in the test itself
    "tests/test_scenarios_valid.py::test_scenario_validates[mnist_lte_dropouts.yaml]",
    "tests/test_shakespeare_federated.py::test_replay_clock_is_deterministic_and_slower_on_3g",
]


def test_every_skip_for_missing_data_names_the_fetch_command_and_the_variable(tmp_path):
    empty = tmp_path / "no-shared"
    empty.mkdir()
    # Without CI: under CI=true these skips would fail the inner run (tests/conftest.py TOLERATED_SKIPS).
    env = {**{k: v for k, v in os.environ.items()
              if k not in ("FEDGC_DATA_DIR", "FEDGC_TRACE_DIR", "PYTEST_ADDOPTS", "CI")},
           "FEDGC_SHARED_DIR": str(empty), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                           *NEEDING_DATA], cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    reasons = [line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith("SKIPPED [")]
    assert f"{len(NEEDING_DATA)} skipped" in done.stdout and len(reasons) >= 1, done.stdout[-3000:]
    for reason in reasons:
        assert str(empty) in reason and "FEDGC_SHARED_DIR" in reason, reason
        commands = re.search(r"get it with: (.+?) \(", reason).group(1).split(" && ")
        for command in commands:
            words = shlex.split(command)
            assert "fetch" in words and words[-2] == "--dir", command  # ... fetch ITEM... --dir D
            pasted = subprocess.run([*words, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120,
                                    check=False)  # runs as printed, here and now
            assert pasted.returncode == 0 and pasted.stdout.startswith("usage: fedgc fetch"), (command, pasted.stderr)
