"""Nothing fedgc starts outlives the fedgc process that started it, however that process dies.

SIGKILL (or the OOM killer) cannot be caught: the runtime's processes are ended by the guard process
(``fedgc.runs.process_guard``), which learns of its parent's death from a pipe the kernel closes. And if
even the guard was killed, the run folder's record (``flower-logs/runtime.json``) lets ``--resume`` and
``--overwrite`` stop what is left, in one line, before they use the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import yaml

from fedgc.runs.process_tree import RUNTIME_FOLDER, RUNTIME_TOKEN, descendants, folder_identity, proc_start_time
from fedgc.runs.runtime_record import RECORD, leftovers, stop_leftovers

from .conftest import REPO
from .test_flower_engine import _marked_processes as marked  # processes carrying FEDGC_TEST_MARK

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the processes")

ROUNDS = 12
STOP_WITHIN_S = 20  # measured 0.5-4 s; generous for a loaded 2-core CI machine


def working_in(folder) -> list[int]:
    """Live processes whose working directory or an open file lies in ``folder``."""
    root = str(folder.resolve())
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        with contextlib.suppress(OSError):
            paths = [os.readlink(f"/proc/{pid}/cwd")]
            paths += [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            if any(p == root or p.startswith(root + "/") for p in paths):
                found.append(int(pid))
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_gone(find, within_s: float) -> float:
    """Seconds until ``find()`` is empty; fails with what is left after ``within_s``."""
    started = time.monotonic()
    while (left := find()) and time.monotonic() - started < within_s:
        time.sleep(0.1)
    assert not left, f"still running after {within_s} s: {[command_line(p)[:120] for p in left]}"
    return time.monotonic() - started


def still_running(tree: dict[int, int | None]) -> list[int]:
    """The processes of ``tree`` (pid -> start time) that are still alive (not a later reuse of a pid)."""
    return [pid for pid, start in tree.items() if start is not None and proc_start_time(pid) == start]


def start_flower_run(tmp_path, tiny_scenario, mark: str, out):
    tiny_scenario.update(engine="flower", rounds=ROUNDS, checkpoint_every=1)
    tiny_scenario["data"]["num_clients"] = 2
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDGC_TEST_MARK": mark}
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(out), "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = out / "metrics.jsonl"
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 2 and (out / "checkpoint.pt").is_file():
            break
        time.sleep(0.1)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()[-500:]}"
    return proc, path


def resume(out, mark: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDGC_TEST_MARK": mark}
    return subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(out), "--quiet"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=400, check=False)


@pytest.mark.ray
def test_sigkill_of_the_fedgc_process_only_ends_the_flower_runtime_and_resume_finishes(tmp_path, tiny_scenario):
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    out, mark = tmp_path / "out", uuid.uuid4().hex
    proc, _ = start_flower_run(tmp_path, tiny_scenario, mark, out)
    try:
        record = json.loads((out / RECORD).read_text())
        assert len(marked(mark)) > 3, "the runtime runs in several processes (SuperLink, Ray, ...)"
        # Its whole tree as it is now, by pid and start time: Ray may write a process's title over its
        # environment, hiding the marker and the token from /proc/PID/environ.
        tree = {pid: proc_start_time(pid) for pid in descendants(proc.pid)}
        proc.kill()  # SIGKILL to the fedgc process alone, not its group
        proc.wait(timeout=30)
        took = wait_gone(lambda: sorted(set(marked(mark)) | set(still_running(tree))), STOP_WITHIN_S)
        print(f"runtime gone {took:.1f} s after the SIGKILL")
        assert working_in(out) == []
        assert leftovers(out) == [], "no process holds the run's token"
        assert record["token"] and record["processes"][0]["name"] == "flower-superlink"
    finally:
        if proc.poll() is None:
            proc.kill()
    done = resume(out, mark)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "left running" not in done.stderr, "the guard had already stopped everything"
    assert json.loads((out / "summary.json").read_text())["rounds"] == ROUNDS
    wait_gone(lambda: marked(mark), 5)


@pytest.mark.ray
def test_a_runtime_that_outlived_its_guard_is_stopped_by_overwrite_in_one_line(tmp_path, tiny_scenario):
    """Belt and braces: the guard killed too, the runtime lives on; a new run into the folder with
    ``--overwrite`` stops exactly the recorded runtime first and says so."""
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    out, mark = tmp_path / "out", uuid.uuid4().hex
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 env={**os.environ, "FEDGC_TEST_MARK": mark})
    proc, path = start_flower_run(tmp_path, tiny_scenario, mark, out)
    try:
        guards = [p for p in marked(mark) if "fedgc.runs.process_guard" in command_line(p)]
        assert len(guards) == 1
        for pid in (*guards, proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(3)
        orphans = leftovers(out)
        assert orphans and bystander.pid not in orphans, "the record names the runtime, not the bystander"
        # The folder's leftovers are stopped whatever engine the new run uses: the inline one here, so no
        # second Flower runtime has to start (and be told from the recorded one).
        tiny_scenario.update(rounds=2, engine="inline")
        path.write_text(yaml.safe_dump(tiny_scenario))
        env = {**os.environ, "PYTHONPATH": str(REPO), "FEDGC_TEST_MARK": mark}
        done = subprocess.run([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(out), "--overwrite",
                               "--quiet"], cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
                              check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        lines = [line for line in done.stderr.splitlines() if "left running" in line]
        assert len(lines) == 1 and lines[0].startswith("stopped ") and "SuperLink on port" in lines[0], done.stderr
        assert set(marked(mark)) == {bystander.pid}, [command_line(p)[:120] for p in marked(mark)]
        assert len(json.loads((out / "summary.json").read_text())) > 0
    finally:
        bystander.kill()
        if proc.poll() is None:
            proc.kill()


# A fedgc process holding a deployment on 127.0.0.1 (a SuperLink, two SuperNodes, flwr run of a long
# scenario) with fedgc's launcher functions; it prints the run folder when the first round is done.
DEPLOYMENT = """
import sys, threading, time
from pathlib import Path
import tomli_w, yaml
from fedgc.flower.runtime.runtime_processes import (flower_env, flwr_run, free_port, start_superlink,
    start_supernode, write_connection)
work = Path(sys.argv[1])
env = flower_env(work / "home")
port = free_port()
write_connection(work / "home", "local", f"127.0.0.1:{port}")
link = start_superlink(port, work, env, simulation=False)
nodes = [start_supernode(port, p, 2, work, env) for p in (0, 1)]
scenario = {"name": "d", "seed": 3, "rounds": 400, "data": {"dataset": "digits", "num_clients": 2},
            "model": {"name": "mlp"}, "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
            "compression": {"name": "dgc", "density": 0.05}, "strategy": {"fraction": 1.0}}
(work / "rc.toml").write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(scenario), "out-dir": str(work / "out"),
                                             "quiet": True, "node-wait-s": 60.0}))
threading.Thread(target=flwr_run, args=(sys.argv[2], "local", work / "rc.toml", env, work / "flwr-run.log"),
                 daemon=True).start()
while not (work / "out" / "metrics.jsonl").exists():
    time.sleep(0.1)
print(env["FEDGC_RUNTIME_TOKEN"], flush=True)
time.sleep(600)
"""


@pytest.mark.deployment
def test_sigkill_of_the_process_holding_a_deployment_ends_superlink_supernodes_and_flwr_run(tmp_path):
    from fedgc.runs.process_tree import token_holders

    mark = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDGC_TEST_MARK": mark}
    holder = subprocess.Popen([sys.executable, "-c", DEPLOYMENT, str(tmp_path), str(REPO)], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, text=True)
    try:
        token = holder.stdout.readline().strip()
        assert token, "the deployment did not start its first round"
        commands = [command_line(p) for p in token_holders(token)]
        assert sum("flower-supernode" in c for c in commands) == 2 and any("flower-superlink" in c for c in commands)
        holder.kill()
        holder.wait(timeout=30)
        took = wait_gone(lambda: marked(mark), STOP_WITHIN_S)
        print(f"deployment gone {took:.1f} s after the SIGKILL")
        assert token_holders(token) == [] and working_in(tmp_path) == []
    finally:
        if holder.poll() is None:
            holder.kill()
        for pid in marked(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# A process that starts a guarded process tree (a SuperLink stand-in whose child ignores SIGTERM, as a
# busy Ray worker may), prints the pids and waits to be killed.
GUARDED_TREE = """
import os, subprocess, sys
from pathlib import Path
from fedgc.flower.runtime.runtime_processes import ManagedProcess
code = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); print(c.pid, flush=True); "
        "time.sleep(300)")
log = Path(sys.argv[1]) / "tree.log"
top = ManagedProcess([sys.executable, "-c", code], log, dict(os.environ))
while not log.read_text().strip():
    pass
print(top.process.pid, log.read_text().strip(), flush=True)
import time; time.sleep(600)
"""


def test_the_guard_ends_a_killed_process_s_tree_even_what_ignores_sigterm(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", GUARDED_TREE, str(tmp_path)], env={**os.environ,
                              "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in holder.stdout.readline().split()]
        assert len(pids) == 2 and all(proc_start_time(p) for p in pids)
        holder.kill()
        took = wait_gone(lambda: [p for p in pids if proc_start_time(p) is not None], 15)
        assert took < 15
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_guarded_process_stopped_by_its_parent_is_not_touched_after_a_normal_exit(tmp_path):
    """``done``: a parent that ends normally leaves its guard nothing to do, and the guard exits."""
    code = ("import sys, time; from fedgc.runs.process_guard import Guard; g = Guard(); "
            "print(g._process.pid, flush=True); g.close()")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=60, check=True)
    assert proc_start_time(int(out.stdout)) is None, "the guard exited with its parent"


def test_the_record_stops_only_processes_that_prove_they_are_its_runtime(tmp_path):
    """The record's token and this folder's identity in a process's own environment prove it is the
    folder's runtime; its descendants (whose environment Ray may overwrite) go with it. A recorded pid
    and start time prove nothing; a holder of the token started for another folder is not this one's.
    A record that is not fedgc's (wrong types, oversize, a malformed token) touches nothing."""
    token = uuid.uuid4().hex
    sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
    named = subprocess.Popen(sleep)  # recorded by pid and start time, without the token
    elsewhere = subprocess.Popen(sleep, env={**os.environ, RUNTIME_TOKEN: token, RUNTIME_FOLDER: "1:1"})
    try:
        (tmp_path / RECORD).parent.mkdir(parents=True)
        start = proc_start_time(named.pid)
        record = {"token": token, "port": 1, "processes": [{"name": "x", "pid": named.pid, "start": start}]}
        (tmp_path / RECORD).write_text(json.dumps(record))
        assert leftovers(tmp_path) == [] and stop_leftovers(tmp_path) is None
        assert named.poll() is None and elsewhere.poll() is None
        holder = subprocess.Popen(sleep, env={**os.environ, RUNTIME_TOKEN: token,
                                              RUNTIME_FOLDER: folder_identity(tmp_path)})
        try:
            for hostile in ({**record, "token": "../../etc"}, {**record, "processes": [{"pid": "1", "start": 0}]},
                            {**record, "processes": [{"pid": 10**12, "start": 0}]}, [1, 2], "x" * 70_000):
                (tmp_path / RECORD).write_text(json.dumps(hostile))
                assert leftovers(tmp_path) == [] and holder.poll() is None
            (tmp_path / RECORD).write_text(json.dumps(record))
            assert leftovers(tmp_path) == [holder.pid]
            line = stop_leftovers(tmp_path)
            assert line == f"stopped 1 process(es) an earlier run of {tmp_path} left running (its SuperLink on port 1)"
            assert holder.wait(timeout=20) is not None
        finally:
            holder.kill()
        assert named.poll() is None and elsewhere.poll() is None
    finally:
        for process in (named, elsewhere):
            process.kill()
            process.wait()


def test_resume_of_a_folder_first_stops_what_its_record_names_in_one_line(tmp_path, capsys):
    """``--resume`` stops what is left of the folder's recorded runtime before it reads the folder: the
    holders of its token and folder identity, with their descendants; not a process the record names
    by pid and start time only, nor a bystander of another token."""
    from fedgc.cli.run import main

    token = uuid.uuid4().hex
    folder = tmp_path / "run"
    (folder / RECORD).parent.mkdir(parents=True)
    (folder / "scenario.yaml").write_text("name: [unclosed\n")  # a run folder, whose scenario then fails
    sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
    # A holder whose child does not carry the token (as Ray's title rewrite leaves it): its descendant.
    parent = [sys.executable, "-c", ("import os, subprocess, sys, time; env = {k: v for k, v in os.environ.items() "
              "if not k.startswith('FEDGC_RUNTIME')}; c = subprocess.Popen(sys.argv[1:], env=env); "
              "print(c.pid, flush=True); time.sleep(300)"), *sleep]
    holder = subprocess.Popen(parent, env={**os.environ, RUNTIME_TOKEN: token, RUNTIME_FOLDER: folder_identity(folder)},
                              stdout=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    recorded = subprocess.Popen(sleep)
    bystander = subprocess.Popen(sleep, env={**os.environ, RUNTIME_TOKEN: uuid.uuid4().hex})
    try:
        entry = {"name": "flower-superlink", "pid": recorded.pid, "start": proc_start_time(recorded.pid)}
        (folder / RECORD).write_text(json.dumps({"token": token, "port": 1, "processes": [entry]}))
        assert main(["--resume", str(folder), "--quiet"]) == 2  # the scenario.yaml: a one-line error after
        lines = capsys.readouterr().err.splitlines()
        assert lines[0] == f"stopped 2 process(es) an earlier run of {folder} left running (its SuperLink on port 1)"
        assert len(lines) == 2 and lines[1].startswith("error: "), lines
        assert holder.wait(timeout=20) is not None
        wait_gone(lambda: [child] if proc_start_time(child) is not None else [], 20)
        assert recorded.poll() is None, "a pid and start time in a file prove nothing"
        assert bystander.poll() is None, "a process of another token is not touched"
    finally:
        for process in (holder, recorded, bystander):
            process.kill()
            process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


# A process holding a shaped star (network namespaces) with a process in the client's namespace.
SHAPED = """
import os, sys
from pathlib import Path
from fedgc.shaped.netns import Star
from fedgc.shaped.processes import NamespaceProcess
star = Star([(10.0, 10.0)])
work = Path(sys.argv[1])
p = NamespaceProcess(star.clients[0].namespace, ["sleep", "300"], work / "sleep.log", dict(os.environ))
print(star.hub, star.clients[0].namespace, p.pid, flush=True)
import time; time.sleep(600)
"""


@pytest.mark.netns
def test_sigkill_of_the_process_holding_a_shaped_star_ends_its_processes_and_deletes_its_namespaces(tmp_path):
    from fedgc.shaped.netns import namespaces_with, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    holder = subprocess.Popen([sys.executable, "-c", SHAPED, str(tmp_path)], env={**os.environ, "PYTHONPATH": str(REPO)},
                              stdout=subprocess.PIPE, text=True)
    try:
        hub, client, pid = holder.stdout.readline().split()
        members = [int(pid)]
        assert proc_start_time(int(pid)) is not None and namespaces_with(hub) and namespaces_with(client)
        holder.kill()
        holder.wait(timeout=30)
        took = wait_gone(lambda: [p for p in members if proc_start_time(p) is not None], STOP_WITHIN_S)
        print(f"shaped star's process gone {took:.1f} s after the SIGKILL")
        deadline = time.monotonic() + STOP_WITHIN_S
        while (namespaces_with(hub) or namespaces_with(client)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not namespaces_with(hub) and not namespaces_with(client), "the guard deletes the namespaces"
    finally:
        if holder.poll() is None:
            holder.kill()
