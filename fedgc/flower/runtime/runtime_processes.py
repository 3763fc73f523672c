"""Starting and stopping Flower 1.41–1.42's processes (SuperLink, SuperNodes, ``flwr run``) on this machine.

Flower 1.41–1.42 facts this relies on (read from the installed sources and ``--help``):
- ``flower-superlink`` serves its Fleet, Control and Runtime APIs over HTTP on one ``--host``/``--port``
  (default 8000; the old 9091/9092/9093 gRPC ports are deprecated) and answers ``GET /health``.
  With ``--simulation`` it runs ClientApps on the Ray-based simulation runtime instead of SuperNodes.
  In its default ``subprocess`` isolation it spawns ``flower-superexec``, found on ``PATH``.
- ``flower-supernode`` connects to ``--superlink HOST:PORT`` and serves its own Runtime HTTP API on
  ``--port`` (default 9094; one free port per SuperNode on a shared machine).
- The SuperLink's SuperExec starts ``flwr-simulation``, which starts Ray (GCS, raylet, dashboard,
  workers): all of them stay in the SuperLink's session and inherit its environment, and some survive a
  SIGTERM to their group. So stopping means: SIGTERM to every process of the session, wait, SIGKILL the
  rest, until none is left (``ManagedProcess.stop``); and the engine also ends every process that
  carries its ``RUNTIME_TOKEN`` in its environment, in case one started a session of its own.
- ``flwr run APP CONNECTION`` reads the SuperLink connection ``CONNECTION`` from
  ``$FLWR_HOME/config.toml`` (``[superlink.NAME] address, insecure``), builds the app's FAB and submits
  it. A legacy ``[tool.flwr.federations]`` table in the app's pyproject.toml is *rewritten* by it
  (migrated into config.toml), so fedgc's pyproject.toml has none.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from fedgc.runs.process_guard import Guard, shared_guard
from fedgc.runs.process_tree import RUNTIME_TOKEN, session_members, terminate


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def flower_env(flwr_home: Path) -> dict[str, str]:
    """Environment for Flower's CLIs: a private FLWR_HOME, this interpreter's scripts first on PATH
    (the SuperLink finds ``flower-superexec`` there), no update check and no telemetry."""
    env = os.environ.copy()
    env["FLWR_HOME"] = str(flwr_home)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["FLWR_DISABLE_UPDATE_CHECK"] = "1"
    env["FLWR_TELEMETRY_ENABLED"] = "0"
    env[RUNTIME_TOKEN] = uuid.uuid4().hex
    return env


def write_connection(flwr_home: Path, name: str, address: str) -> None:
    """An insecure SuperLink connection ``name`` at ``address``, the default one."""
    flwr_home.mkdir(parents=True, exist_ok=True)
    (flwr_home / "config.toml").write_text(
        f'[superlink]\ndefault = "{name}"\n\n[superlink.{name}]\naddress = "{address}"\ninsecure = true\n')


def script(name: str) -> str:
    """Path of one of Flower's console scripts installed beside this interpreter."""
    return str(Path(sys.executable).parent / name)


class ManagedProcess:
    """A child process in its own process group, logged to a file, stopped with everything it spawned
    into its group. A guard (``fedgc.runs.process_guard``; this process's shared one unless ``guard`` is
    given) ends it, with its session, its descendants and the holders of its environment's runtime
    token, if this process dies without stopping it (SIGKILL, the OOM killer)."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str], cwd: Path | None = None,
                 guard: Guard | None = None) -> None:
        self.command = command
        self.log_path = log_path
        self._guard = guard if guard is not None else shared_guard()
        self._log = open(log_path, "ab")  # noqa: SIM115 — closed in stop()
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                        cwd=cwd, start_new_session=True)
        self._guard.watch(self.process.pid, env.get(RUNTIME_TOKEN))

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop every process of its session (what it started, Ray included, unless they left the
        session): SIGTERM, SIGKILL after ``grace_s``, and wait until none is left."""
        sid = self.process.pid  # start_new_session: the process leads its own session
        if os.path.isdir("/proc"):
            terminate(lambda: session_members(sid), grace_s)
        elif self.running():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(sid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(sid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self._guard.release(self.process.pid)
        self._log.close()

    def log_tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def http_ready(port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).is_success
    except httpx.HTTPError:
        return False


def wait_until(ready, timeout_s: float, what: str, process: ManagedProcess | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process is not None and not process.running():
            raise RuntimeError(f"{what} exited with code {process.process.returncode}:\n{process.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready within {timeout_s:.0f} s")
        time.sleep(0.2)


def start_superlink(port: int, workdir: Path, env: dict[str, str], *, simulation: bool,
                    guard: Guard | None = None) -> ManagedProcess:
    """An insecure SuperLink on 127.0.0.1:``port`` with in-memory state. Runtime dependency
    installation is off: the run uses this environment's packages, nothing is fetched."""
    command = [script("flower-superlink"), "--insecure", "--host", "127.0.0.1", "--port", str(port),
               "--disable-runtime-dependency-installation"]
    if simulation:
        command.append("--simulation")
    link = ManagedProcess(command, workdir / "superlink.log", env, cwd=workdir, guard=guard)
    try:
        wait_until(lambda: http_ready(port), 60, "flower-superlink", link)
    except BaseException:
        link.stop()
        raise
    return link


def start_supernode(superlink_port: int, partition: int, num_partitions: int, workdir: Path,
                    env: dict[str, str], data_dir: Path | None = None, plugins: str | None = None) -> ManagedProcess:
    """An insecure SuperNode holding ``partition`` (its ClientApp reads ``node_config``); with
    ``data_dir``, it trains on that folder's ``train.npz`` (device-local data); ``plugins``: the
    modules a train message's import paths may name on this node (docs/api.md)."""
    node_config = f"partition-id={partition} num-partitions={num_partitions}"
    if data_dir is not None:
        node_config += f" data-dir='{data_dir}'"  # a TOML literal string: no escapes in the path
    if plugins is not None:
        node_config += f" plugins='{plugins}'"
    command = [script("flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{superlink_port}",
               "--node-config", node_config,
               "--host", "127.0.0.1", "--port", str(free_port())]
    return ManagedProcess(command, workdir / f"supernode-{partition}.log", env, cwd=workdir)


def flwr_run(app_dir: Path, connection: str, run_config: Path, env: dict[str, str], log_path: Path,
             federation_config: list[str] = (), timeout_s: float | None = None,
             guard: Guard | None = None) -> subprocess.CompletedProcess:
    """``flwr run APP CONNECTION --run-config FILE --stream``: submits the app and returns when the
    run has finished (the log stream ends with the run). Guarded as a ``ManagedProcess`` is. Flower's
    command exits 0 even when the run failed (the ServerApp raised): the return code is 1 then, from
    the run's status on the SuperLink (``run_status``), with a line saying so at the end of the log."""
    command = [script("flwr"), "run", str(app_dir), connection, "--run-config", str(run_config), "--stream"]
    for item in federation_config:
        command += ["--federation-config", item]
    guard = guard if guard is not None else shared_guard()
    start = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as log, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                       env=env) as process:
        guard.watch(process.pid, env.get(RUNTIME_TOKEN))
        try:
            code = process.wait(timeout=timeout_s)
        except BaseException:
            process.kill()
            raise
        finally:
            guard.release(process.pid)
    if code == 0:  # Flower's `flwr run` exits 0 even when the run failed: ask the SuperLink how it ended
        run_id = started_run_id(log_path, start)
        status = run_status(connection, run_id, env) if run_id is not None else None
        if status is not None and status != COMPLETED:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(f"\nfedgc: run {run_id} ended {status}\n")
            code = 1
    return subprocess.CompletedProcess(command, code)


COMPLETED = "finished:completed"
_STARTED = re.compile(r"Successfully started run (\d+)")


def started_run_id(log_path: Path, start: int = 0) -> int | None:
    """The run id ``flwr run`` printed (``Successfully started run N``) in ``log_path`` after byte ``start``."""
    try:
        with open(log_path, "rb") as f:
            f.seek(start)
            text = f.read(1 << 20).decode(errors="replace")
    except OSError:
        return None
    found = _STARTED.search(text)
    return int(found.group(1)) if found else None


def run_status(connection: str, run_id: int, env: dict[str, str], timeout_s: float = 60.0) -> str | None:
    """How run ``run_id`` ended (``finished:completed``, ``finished:failed``, ...) by ``flwr list
    --run-id ID --format json``; None when the SuperLink cannot say."""
    import json

    deadline, status = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:  # the log stream may end a moment before the status is final
        try:
            done = subprocess.run([script("flwr"), "list", connection, "--run-id", str(run_id), "--format", "json"],
                                  capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
            runs = json.loads(done.stdout).get("runs", [])
            status = runs[0].get("status") if runs else None
        except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError, IndexError, TypeError):
            return None
        if not isinstance(status, str):
            return None
        if status.startswith("finished"):
            return status
        time.sleep(0.5)
    return status


@contextlib.contextmanager
def signals_ignored():
    """SIGINT and SIGTERM are ignored meanwhile (a second Ctrl-C must not cut the clean-up short)."""
    try:
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt meanwhile, so ``finally`` blocks stop the processes we started."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
