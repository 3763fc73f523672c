"""Processes run inside a namespace (``ip netns exec``), each leading its own session, stopped with
everything they started into it (SIGTERM, then SIGKILL after a grace period), and by this process's
guard (``fedgc.runs.process_guard``) if this process is killed first."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from fedgc.runs.process_guard import shared_guard


def _session_members(sid: int) -> list[int]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] not in (b"Z", b"X") and int(pid) != os.getpid():
            found.append(int(pid))
    return found


class NamespaceProcess:
    """``command`` run in ``namespace``, output to ``log_path``."""

    def __init__(self, namespace: str, command: list[str], log_path: Path, env: dict[str, str],
                 cwd: Path | None = None) -> None:
        self.namespace = namespace
        self.command = command
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 — closed in stop()
        self.process = subprocess.Popen(["ip", "netns", "exec", namespace, *command], stdout=self._log,
                                        stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        shared_guard().watch(self.process.pid)  # its session is ended if this process is killed

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def members(self) -> list[int]:
        return _session_members(self.process.pid)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to every process of its session, SIGKILL to what is left after ``grace_s``; returns
        when none is left."""
        sid = self.process.pid
        deadline = time.monotonic() + grace_s
        sig = signal.SIGTERM
        while True:
            members = _session_members(sid)
            if self.running() and sid not in members:
                members.append(sid)
            if not members:
                break
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            self.process.poll()  # reap the leader so it does not linger as a zombie
            if time.monotonic() > deadline:
                sig = signal.SIGKILL
            if time.monotonic() > deadline + 10:
                raise RuntimeError(f"processes {members} of {self.command[0]} survive SIGKILL")
            time.sleep(0.1)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        shared_guard().release(self.process.pid)
        self._log.close()

    def log_tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])
