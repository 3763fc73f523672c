"""A watchdog that ends what a fedgc process started when that process dies, however it dies.

Ctrl-C and SIGTERM are handled in the process itself (``finally`` blocks stop every runtime process).
SIGKILL and the out-of-memory killer cannot be caught, so the clean-up also lives in a second, small
process: the **guard**. A ``Guard`` starts it (``python -m fedgc.runs.process_guard``) in a session of its
own, and keeps the write end of a pipe whose read end only the guard holds (the write end is not
inheritable: the runtime's processes never get it). The guard learns of its parent's death from that
pipe: the kernel closes the write end when the parent dies, and the guard's read returns end-of-file
at once, whatever the signal. (Every 0.5 s it also checks that the parent, by pid and start time, is
alive, in case a forked copy kept the pipe open.)

Through the pipe the parent tells the guard, one line each:

- ``watch PID START [TOKEN]``: a process the parent started (a SuperLink, a SuperNode, ``flwr run``)
  and its start time; with ``TOKEN``, every process whose environment holds
  ``FEDGC_RUNTIME_TOKEN=TOKEN`` belongs to it too;
- ``release PID``: that process was stopped by the parent;
- ``netns NAME`` / ``forget-netns NAME``: a network namespace to delete when the parent dies;
- ``done``: the parent is ending normally; the guard exits without touching anything.

While it waits, the guard reads the process tree below every watched process twice a second
(``process_tree.Family``), so it still knows a process after its parent died and it was re-parented
to init (Ray's workers), and the members of a watched process's session while that process (by pid
and start time) leads it. On end-of-file it ends them all: SIGTERM to the watched processes' trees,
session members and token holders, SIGKILL to what is left after ``GRACE_S``, and waits until none is
left. A session is found by its leader's pid, which a later process may reuse once the leader and its
session are gone: so a session's members count only while the watched process still leads it, or as
members of its remembered tree, or as token holders — never by the session id alone. Each signal goes
to the process as it was found (start time checked, ``fedgc.runs.process_tree.terminate``);
then deletes the namespaces and exits. Measured on a loaded 2-core machine (load 5-16): a deployment's
processes were gone 0.4-0.7 s after a SIGKILL of the parent, a flower-engine runtime's 1.5-3.1 s (Ray
processes that ignore SIGTERM go at the SIGKILL after ``GRACE_S``); the guard exits about 1.3 s later,
once nothing has shown up for a second (docs/reliability.md).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import subprocess
import sys
import threading

from fedgc.runs.process_tree import Family, proc_start_time, session_members, terminate, token_holders

GRACE_S = 3.0  # SIGTERM, then SIGKILL: a runtime whose parent is gone has nothing to save
POLL_S = 0.5


class Guard:
    """One guard process watching this process. ``watch``/``release`` tell it what to end if this
    process dies; ``close`` ends it (and waits for it) when this process no longer needs it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = os.getpid()
        read_end, self._write_end = os.pipe()  # both non-inheritable; pass_fds hands the read end over
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "fedgc.runs.process_guard", str(read_end), str(os.getpid()),
                 str(proc_start_time(os.getpid()) or 0)],
                pass_fds=(read_end,), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=None, env=_guard_env())
        finally:
            os.close(read_end)

    def _send(self, line: str) -> None:
        if os.getpid() != self._owner or self._write_end < 0:
            return  # a forked copy: the guard watches the process that started it, not this one
        with self._lock, contextlib.suppress(OSError):
            os.write(self._write_end, (line + "\n").encode())

    def watch(self, pid: int, token: str | None = None) -> None:
        """``pid``: a child of this process (not yet waited for, so its pid is not reused meanwhile)."""
        self._send(f"watch {pid} {proc_start_time(pid) or 0}" + (f" {token}" if token else ""))

    def release(self, pid: int) -> None:
        self._send(f"release {pid}")

    def watch_namespace(self, name: str) -> None:
        self._send(f"netns {name}")

    def release_namespace(self, name: str) -> None:
        self._send(f"forget-netns {name}")

    def close(self) -> None:
        """This process ends normally: the guard exits at once without stopping anything."""
        if os.getpid() != self._owner or self._write_end < 0:
            return
        self._send("done")
        with self._lock:
            os.close(self._write_end)
            self._write_end = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=10)

    def __enter__(self) -> Guard:  # noqa: PYI034 — typing.Self needs Python 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _guard_env() -> dict[str, str]:
    """The guard's environment: this one without a runtime token (the guard is no part of a runtime)."""
    from fedgc.runs.process_tree import RUNTIME_TOKEN

    return {k: v for k, v in os.environ.items() if k != RUNTIME_TOKEN}


_shared: Guard | None = None
_shared_lock = threading.Lock()


def shared_guard() -> Guard:
    """This process's guard for processes started outside an engine (deployments, tests, the shaped
    harness), started on first use and closed when the interpreter exits."""
    global _shared  # noqa: PLW0603 — one guard per process, made on first use
    with _shared_lock:
        if _shared is None or _shared._owner != os.getpid():
            _shared = Guard()
            atexit.register(_shared.close)
        return _shared


# --- the guard process -------------------------------------------------------------------------------


class _Watched:
    def __init__(self) -> None:
        self.roots: dict[int, tuple[int, str | None]] = {}  # pid -> (start time, token)
        self.family = Family([])
        self.namespaces: list[str] = []

    def apply(self, line: str) -> bool:
        """One command; False for ``done``."""
        parts = line.split()
        if parts == ["done"]:
            return False
        if len(parts) in (3, 4) and parts[0] == "watch" and parts[1].isdigit() and parts[2].isdigit():
            pid, start = int(parts[1]), int(parts[2])
            if start == 0 or proc_start_time(pid) != start:
                return True  # already gone: nothing of it to watch (its pid may name another process now)
            self.roots[pid] = (start, parts[3] if len(parts) == 4 else None)
            self.family.add(pid)
        elif len(parts) == 2 and parts[0] == "release" and parts[1].isdigit():
            self.roots.pop(int(parts[1]), None)
        elif len(parts) == 2 and parts[0] == "netns":
            self.namespaces.append(parts[1])
        elif len(parts) == 2 and parts[0] == "forget-netns" and parts[1] in self.namespaces:
            self.namespaces.remove(parts[1])
        return True

    def remember(self) -> list[int]:
        """Read the watched processes' trees, and the sessions they still lead, into the family."""
        for pid, (start, _) in self.roots.items():
            if proc_start_time(pid) == start:  # it leads session ``pid`` (start_new_session) while alive
                for member in session_members(pid):
                    self.family.add(member)
        return self.family.members()

    def processes(self) -> list[int]:
        """What to end: the remembered trees, the sessions the watched processes still lead, and the
        holders of their tokens (and what descends from those)."""
        for _, token in self.roots.values():
            if token:
                for pid in token_holders(token):
                    self.family.add(pid)
        return self.remember()

    def end_all(self) -> None:
        if self.roots:
            terminate(self.processes, grace_s=GRACE_S)
        for name in self.namespaces:
            subprocess.run(["ip", "netns", "delete", name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)


def serve(read_end: int, parent: int, parent_start: int) -> int:
    """Wait for the parent's commands; end what it watched when it dies."""
    watched = _Watched()
    pending = b""
    while True:
        ready, _, _ = select.select([read_end], [], [], POLL_S)
        if ready:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break  # the parent's end closed: it died (or exited without saying done)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not watched.apply(line.decode(errors="replace")):
                    return 0
            if len(pending) > 4096:
                pending = b""  # not a command of ours
        if proc_start_time(parent) != parent_start:
            break
        watched.remember()  # remember the tree while it is whole
    watched.end_all()
    return 0


def main(argv: list[str]) -> int:
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # a Ctrl-C to the terminal reaches the parent, which cleans up
    read_end, parent, parent_start = (int(a) for a in argv)
    return serve(read_end, parent, parent_start)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
