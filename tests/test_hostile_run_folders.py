"""A run folder is input: whoever could write it may have edited ``flower-logs/runtime.json`` or planted
links in it. fedgc signals a process only when it can prove the process is the folder's runtime (the
run's token and the folder's identity in the process's own environment, or descent from such a
process), never on a pid and start time read from a file, never pid 1, itself, its ancestors or a
kernel thread; and it writes a run folder's files never through a link (``fedgc.runs.folder``,
``fedgc.runs.runtime_record``, ``fedgc.bounded.open_no_follow``)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from fedgc.cli.run import main
from fedgc.runs.folder import LOCK_NAME
from fedgc.runs.process_tree import (
    PF_KTHREAD,
    RUNTIME_FOLDER,
    RUNTIME_TOKEN,
    descendants,
    folder_identity,
    proc_start_time,
    terminate,
)
from fedgc.runs.runtime_record import RECORD, leftovers, stop_leftovers

from .conftest import REPO

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the processes")

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
VICTIM = b"a file of the user's, elsewhere\n"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A real finished run folder (conftest's tiny scenario on the inline engine, a checkpoint every round)."""
    work = tmp_path_factory.mktemp("finished")
    path = work / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "tiny", "seed": 7, "rounds": 2, "checkpoint_every": 1,
                                    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
                                    "model": {"name": "mlp"}, "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
                                    "compression": {"name": "topk", "density": 0.05}, "strategy": {"fraction": 1.0}}))
    out = work / "run"
    done = subprocess.run([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(out), "--quiet"], cwd=REPO,
                          env=ENV, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture
def run(finished_run, tmp_path) -> Path:
    """A copy of the finished run for one test to edit."""
    return Path(shutil.copytree(finished_run, tmp_path / "run", symlinks=True))


def record_naming(folder: Path, pid: int) -> None:
    """A ``runtime.json`` as an editor of the folder writes it: fedgc's form, naming ``pid`` by its
    real start time, as the fedgc process and as the SuperLink, with a token of its own."""
    start = proc_start_time(pid)
    assert start is not None
    (folder / RECORD).parent.mkdir(parents=True, exist_ok=True)
    (folder / RECORD).write_text(json.dumps({
        "token": uuid.uuid4().hex, "port": 1, "fedgc_pid": pid, "fedgc_start": start,
        "processes": [{"name": "flower-superlink", "pid": pid, "start": start}]}))


def resume(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(folder), "--quiet"], cwd=REPO,
                          env=ENV, capture_output=True, text=True, timeout=300, check=False)


def alive(*pids: int) -> bool:
    return all(proc_start_time(p) is not None for p in pids)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@contextlib.contextmanager
def started(*commands: list[str], **kwargs):
    processes = [subprocess.Popen(c, **kwargs) for c in commands]
    try:
        yield processes
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                if kwargs.get("start_new_session"):
                    os.killpg(process.pid, signal.SIGKILL)  # the process and what it started
                else:
                    process.kill()
            process.wait()


# --- runtime.json names processes that are not the run's -------------------------------------------


def test_a_record_naming_a_sleep_beside_the_folder_leaves_it_running(run):
    with started(["sleep", "1000"]) as (sleep,):
        record_naming(run, sleep.pid)
        done = resume(run)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "left running" not in done.stderr
        assert sleep.poll() is None, "a pid and start time read from a file prove nothing"


def test_a_record_naming_a_shell_leaves_it_and_its_two_children_running(run):
    with started(["bash", "-c", "sleep 1000 & sleep 1000 & wait"], start_new_session=True) as (shell,):
        deadline = time.monotonic() + 20
        while len(descendants(shell.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = descendants(shell.pid)
        assert len(children) == 2
        record_naming(run, shell.pid)
        done = resume(run)
        assert done.returncode == 0 and "left running" not in done.stderr, done.stderr[-2000:]
        assert alive(shell.pid, *children)


# The shell that runs the resume records its own pid first (as an editor of the folder could).
SHELL = """
"$PYTHON" -c 'import sys; from pathlib import Path; from tests.test_hostile_run_folders import record_naming
record_naming(Path(sys.argv[1]), int(sys.argv[2]))' "$1" $$ || exit 9
"$PYTHON" -m fedgc.cli.run --resume "$1" --quiet > /dev/null
echo "the shell survived its resume: $?"
"""


def test_a_record_naming_the_shell_that_runs_the_resume_leaves_the_shell_running(run):
    done = subprocess.run(["bash", "-c", SHELL, "shell", str(run)], cwd=REPO, env={**ENV, "PYTHON": sys.executable},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip() == "the shell survived its resume: 0", (done.returncode, done.stderr[-2000:])
    assert "left running" not in done.stderr


def test_a_record_naming_the_resuming_process_itself_leaves_it_and_its_children_running(run, capsys):
    with started(["sleep", "1000"]) as (child,):
        record_naming(run, os.getpid())
        assert main(["--resume", str(run), "--quiet"]) == 0
        assert "left running" not in capsys.readouterr().err
        assert child.poll() is None, "a child of the process that resumes is not the folder's leftover"


def test_a_record_naming_kernel_threads_signals_none_and_returns_at_once(tmp_path):
    with open("/proc/2/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    if not int(fields[6]) & PF_KTHREAD:
        pytest.skip("pid 2 is not the kernel's thread daemon here (a pid namespace)")
    record_naming(tmp_path, 2)
    started_at = time.monotonic()
    assert leftovers(tmp_path) == [] and stop_leftovers(tmp_path) is None
    assert time.monotonic() - started_at < 5


def test_terminate_never_signals_a_kernel_thread_itself_or_its_parent():
    """Whatever ``find`` returns: here a kernel thread, the calling process and its parent (a shell
    that prints once its child is done)."""
    code = ("import os; from fedgc.runs.process_tree import terminate; "
            "left = terminate(lambda: [2, os.getpid(), os.getppid()], grace_s=0.2); print('child lived', left)")
    done = subprocess.run(["bash", "-c", f'"$PYTHON" -c "{code}"; echo parent lived'], cwd=REPO,
                          env={**ENV, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.stdout.splitlines() == ["child lived []", "parent lived"], done.stderr[-2000:]


def test_resume_of_a_folder_that_is_not_fedgc_s_touches_nothing_and_is_refused(tmp_path, capsys):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    with started(["sleep", "1000"]) as (sleep,):
        record_naming(folder, sleep.pid)
        before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
        assert main(["--resume", str(folder), "--quiet"]) == 2
        assert "not a fedgc run or sweep folder" in one_error_line(capsys)
        assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == before, "no lock file was made"
        assert sleep.poll() is None


def test_a_sweep_s_resume_stops_no_process_a_point_s_record_names_and_skips_a_linked_point(tmp_path, capsys):
    """A point's record naming a sleep is not proof; a point folder that is a link to another folder is
    not the sweep's point, even where that folder's runtime would prove itself."""
    sweep, elsewhere = tmp_path / "sweep", tmp_path / "elsewhere"
    (sweep / "p1").mkdir(parents=True)
    elsewhere.mkdir()
    (sweep / "sweep.yaml").write_text("scenario: {}\n")  # not a plan: the resume fails after the leftovers
    (sweep / "p2").symlink_to(elsewhere, target_is_directory=True)
    token = uuid.uuid4().hex
    sleep = ["sleep", "1000"]
    with started(sleep) as (named,), \
            started(sleep, env={**os.environ, RUNTIME_TOKEN: token, RUNTIME_FOLDER: folder_identity(elsewhere)}) as (
                other_run,):
        record_naming(sweep / "p1", named.pid)
        (elsewhere / RECORD).parent.mkdir()
        (elsewhere / RECORD).write_text(json.dumps({"token": token, "port": 2, "processes": []}))
        assert main(["--resume", str(sweep), "--quiet"]) == 2
        assert "left running" not in capsys.readouterr().err
        assert named.poll() is None and other_run.poll() is None


# --- links planted in a run folder --------------------------------------------------------------------


def test_a_lock_link_is_refused_on_resume_and_on_out_and_the_file_it_names_is_unchanged(run, tmp_path, tiny_scenario,
                                                                                        capsys):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    (run / LOCK_NAME).symlink_to(victim)
    assert main(["--resume", str(run), "--quiet"]) == 2
    assert f"its {LOCK_NAME} is a link" in one_error_line(capsys)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / LOCK_NAME).symlink_to(victim)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario))
    for extra in ([], ["--overwrite"]):
        assert main([str(scenario), "--out", str(empty), "--quiet", *extra]) == 2
        assert f"{empty / LOCK_NAME}: is a link" in one_error_line(capsys)
    assert victim.read_bytes() == VICTIM
    assert (run / LOCK_NAME).is_symlink() and (empty / LOCK_NAME).is_symlink() and os.listdir(empty) == [LOCK_NAME]


@pytest.mark.parametrize("name", ["metrics.jsonl", "checkpoint.pt"])
def test_resume_of_a_run_whose_file_is_a_link_is_refused_and_the_file_it_names_is_unchanged(run, tmp_path, name,
                                                                                           capsys):
    victim = tmp_path / f"victim-{name}"
    shutil.copyfile(run / name, victim)  # the run's own bytes: the resume would read it as the run's
    before = victim.read_bytes()
    (run / name).unlink()
    (run / name).symlink_to(victim)
    assert main(["--resume", str(run), "--quiet"]) == 2
    assert f"its {name} is a link" in one_error_line(capsys)
    assert victim.read_bytes() == before and (run / name).is_symlink()


def test_the_run_folder_writers_never_write_through_a_link(finished_run, tmp_path):
    """metrics.jsonl appended to, the checkpoint, summary.json and runtime.json written through their
    temporary files: a link at any of them is refused in one OSError line, the file it names unchanged."""
    from fedgc.core.checkpoint import CheckpointWriteError, write_file
    from fedgc.runs.metrics import MetricsLog, RoundRecord, Summary, parse_record, write_summary
    from fedgc.runs.runtime_record import write_record

    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    folder = tmp_path / "run"
    (folder / "flower-logs").mkdir(parents=True)
    log = MetricsLog(folder / "metrics.jsonl")
    (folder / "metrics.jsonl").unlink()
    (folder / "metrics.jsonl").symlink_to(victim)
    row = (finished_run / "metrics.jsonl").read_text().splitlines()[0]
    with pytest.raises(OSError, match="is a link"):
        log.append(parse_record(RoundRecord, row, "metrics.jsonl"))
    with pytest.raises(OSError, match="is a link"):
        MetricsLog(folder / "metrics.jsonl")
    for tmp in ("checkpoint.pt.tmp", "summary.json.tmp", "flower-logs/runtime.tmp"):
        (folder / tmp).symlink_to(victim)
    with pytest.raises(CheckpointWriteError):
        write_file(folder / "checkpoint.pt", {"format": 4})
    summary = Summary("x", 0, None, None, 0.0, 0.0, 0, 0, 0, None, 0.5, None, None, 0, 0, 0, 0, 0)
    with pytest.raises(OSError, match="is a link"):
        write_summary(folder / "summary.json", summary)
    with pytest.raises(OSError, match="is a link"):
        write_record(folder, uuid.uuid4().hex, 1, {})
    assert victim.read_bytes() == VICTIM
    assert not (folder / "checkpoint.pt").exists() and not (folder / "summary.json").exists()


# --- the guard's session kill ---------------------------------------------------------------------------


def test_the_guard_counts_a_session_only_while_the_watched_process_leads_it():
    """The guard finds a watched process's session by its pid, which names another process once the
    watched one is gone: a session is counted only while its leader is the watched process (pid and
    start time); once the leader is gone, only its remembered tree is."""
    from fedgc.runs.process_guard import _Watched

    with started(["bash", "-c", "sleep 1000 & wait"], start_new_session=True) as (leader,):
        deadline = time.monotonic() + 20
        while not descendants(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (member,) = descendants(leader.pid)
        start = proc_start_time(leader.pid)
        stale = _Watched()
        stale.apply(f"watch {leader.pid} {start + 1}")  # its pid now names another process than the one watched
        assert stale.processes() == []
        watched = _Watched()
        watched.apply(f"watch {leader.pid} {start}")
        assert watched.processes() == sorted([leader.pid, member])
        leader.kill()
        leader.wait()
        assert watched.processes() == [member], "the remembered tree outlives its leader"
        assert terminate(watched.processes, grace_s=2.0) == [] and not alive(member)


@pytest.mark.parametrize("side", ["-journal", "-wal", "-shm"])
def test_a_link_beside_the_client_state_store_is_refused_on_resume_and_by_the_store(run, tmp_path, side, capsys):
    """SQLite opens its journal (truncated to nothing after each commit), write-ahead log and shared
    memory beside the store by name, following links: a link there would have SQLite write, or empty,
    the file it names. ``--resume`` refuses such a folder before anything is written, and the store
    itself refuses to open beside one; the file named keeps its bytes."""
    from fedgc.flower.state.disk_store import DiskStore, StoreError

    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    name = "client-state.sqlite" + side
    (run / name).symlink_to(victim)
    assert main(["--resume", str(run), "--quiet"]) == 2
    assert f"its {name} is a link" in one_error_line(capsys)
    store = tmp_path / "store" / "client-state.sqlite"
    store.parent.mkdir()
    DiskStore(store, fresh=True)  # a real store (its empty journal left beside it), then the link
    Path(str(store) + side).unlink(missing_ok=True)
    Path(str(store) + side).symlink_to(victim)
    with pytest.raises(StoreError, match=f"{name} is a link; nothing was written through it"):
        DiskStore(store)
    assert victim.read_bytes() == VICTIM and Path(str(store) + side).is_symlink()
    DiskStore(store, fresh=True)  # a fresh store removes the link itself, not what it names
    assert not Path(str(store) + side).is_symlink() and victim.read_bytes() == VICTIM
