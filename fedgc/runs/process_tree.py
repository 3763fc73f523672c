"""Finding and stopping the processes a run started (Linux ``/proc``): by session, by an environment
token, by process tree (remembered across re-parenting), and as a subreaper of its own descendants.
Flower-free; fedgc.flower.runtime.runtime_processes stops Flower's runtimes with it.

:func:`terminate` never signals pid 0 or 1, the calling process or any of its ancestors, or a kernel
thread, whatever ``find`` returns; and it signals a process only while its start time is the one it
had when it was found (through a pidfd where the kernel has them, so a pid reused meanwhile is not
signalled)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import cast

RUNTIME_TOKEN = "FEDGC_RUNTIME_TOKEN"  # set in flower_env's environment, inherited by every process it starts
# The run folder a recorded runtime belongs to (``folder_identity``), set beside the token by the flower
# engine: a token copied from another folder's record finds none of this folder's processes.
RUNTIME_FOLDER = "FEDGC_RUNTIME_FOLDER"
PF_KTHREAD = 0x00200000  # linux/sched.h: the flags field of /proc/PID/stat marks a kernel thread


def _proc_stat(pid: str) -> tuple[int, str, int, int, int] | None:
    """(session id, state, parent, start time in clock ticks, flags) of a process from /proc, None if
    it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[3]), fields[0].decode(), int(fields[1]), int(fields[19]), int(fields[6])
    except (OSError, IndexError, ValueError):
        return None


def folder_identity(folder: str | os.PathLike[str]) -> str:
    """``DEVICE:INODE`` of a folder (the same after the folder is renamed; another folder's differs)."""
    info = os.stat(folder)
    return f"{info.st_dev}:{info.st_ino}"


def ancestors(pid: int) -> set[int]:
    """The parent chain of ``pid`` (its parent, that one's parent, ..., to pid 1), read from /proc."""
    found: set[int] = set()
    while pid > 1 and len(found) < 4096:
        stat = _proc_stat(str(pid))
        if stat is None or stat[2] in found:
            break
        pid = stat[2]
        found.add(pid)
    return found


def _protected() -> set[int]:
    """What :func:`terminate` never signals: this process and its ancestors (and pids 0 and 1)."""
    return {0, 1, os.getpid()} | ancestors(os.getpid())


def _signal_if_same(pid: int, start: int, sig: int) -> None:
    """``sig`` to ``pid`` only if it is still the process that started at ``start``: through a pidfd
    (opened first, then the start time checked, so the signal reaches that process or none)."""
    pidfd = -1
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError, AttributeError):
        pidfd = os.pidfd_open(pid)
    try:
        now = _proc_stat(str(pid))
        if now is None or now[3] != start or now[1] in ("Z", "X"):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if pidfd >= 0:
                signal.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(pid, sig)
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def proc_start_time(pid: int) -> int | None:
    """Start time of a live process (clock ticks since boot): with its pid, it names one process,
    never a later one that reuses the pid. None if it is gone or a zombie."""
    stat = _proc_stat(str(pid))
    return None if stat is None or stat[1] in ("Z", "X") else stat[3]


def _live_pids(match: Callable[[str, int], bool]) -> list[int]:
    """Processes (not zombies, not this one) for which ``match(pid, session)`` holds."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        stat = _proc_stat(pid)
        if stat is not None and stat[1] not in ("Z", "X") and match(pid, stat[0]):
            found.append(int(pid))
    return found


PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37  # linux/prctl.h


def adopt_orphans() -> bool:
    """Make this process its descendants' subreaper (Linux): a process whose parent dies is re-parented
    to this one instead of init, so :func:`descendants` still finds everything the command started,
    whatever its session or environment (Ray rewrites its workers' process titles over their
    environment block, which can hide the runtime token). Only for a process that is the command
    itself; False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # prctl's default restype is c_int: an int, so the comparison is a bool (ctypes is untyped here)
        return cast(bool, ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def adopts_orphans() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    flag = ctypes.c_int(0)
    try:
        ok = ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    return ok and flag.value != 0


def descendants(root: int) -> list[int]:
    """Live processes below ``root`` in the process tree."""
    children: dict[int, list[int]] = {}
    for entry in (p for p in os.listdir("/proc") if p.isdigit()):
        stat = _proc_stat(entry)
        if stat is not None and stat[1] not in ("Z", "X"):
            children.setdefault(stat[2], []).append(int(entry))
    found: list[int]
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(found)


class Family:
    """The live processes descended from ``roots``, remembered: a process seen once stays a member
    (checked by its start time, so a reused pid is not) after its parent died and it was re-parented
    away, and its own children join. Read before anything is signalled, it holds the whole tree."""

    def __init__(self, roots: list[int], known: dict[int, int] | None = None) -> None:
        """``roots`` as they are now; ``known``: pid -> start time recorded earlier (a pid whose
        process has another start time now is a different process, and is left out)."""
        self._seen: dict[int, int] = dict(known or {})
        for pid in roots:
            self.add(pid)

    def add(self, pid: int) -> None:
        start = proc_start_time(pid)
        if start is not None:
            self._seen[pid] = start

    def members(self) -> list[int]:
        table = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _proc_stat(p)) is not None}
        live = {pid for pid, start in self._seen.items() if pid in table and table[pid][3] == start}
        grown = True
        while grown:
            new = {pid for pid, s in table.items() if s[2] in live and pid not in live}
            grown = bool(new)
            live |= new
        for pid in live:
            self._seen.setdefault(pid, table[pid][3])
        return sorted(pid for pid in live if table[pid][1] not in ("Z", "X") and pid != os.getpid())


def session_members(sid: int) -> list[int]:
    return _live_pids(lambda pid, session: session == sid)


def token_holders(token: str, folder: str | None = None) -> list[int]:
    """Processes whose environment holds ``RUNTIME_TOKEN=token`` (this user's; others' are unreadable),
    and with ``folder``, ``RUNTIME_FOLDER=folder`` too."""
    needles = [f"{RUNTIME_TOKEN}={token}".encode() + b"\0"]
    if folder is not None:
        needles.append(f"{RUNTIME_FOLDER}={folder}".encode() + b"\0")

    def holds(pid: str, session: int) -> bool:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = b"\0" + f.read()
        except OSError:
            return False
        return all(b"\0" + needle in environ for needle in needles)

    return _live_pids(holds)


def terminate(find: Callable[[], list[int]], grace_s: float = 10.0, quiet_s: float = 1.0) -> list[int]:
    """SIGTERM every process ``find()`` returns (again for any that appear meanwhile), SIGKILL what is
    left after ``grace_s``, and wait until ``find()`` is empty (at most 30 s more) and stays empty for
    ``quiet_s``: a process that was forking when its parent died (Ray's workers) shows up a moment
    later and must be ended too. Returns survivors. Never pid 0 or 1, this process or its ancestors,
    or a kernel thread (they are left out of what ``find`` returns); each signal only to the process
    ``find`` saw (its start time checked through a pidfd)."""
    def targets() -> dict[int, int]:
        """pid -> start time of what ``find()`` returns that may be signalled at all."""
        protected, found = _protected(), {}
        for pid in find():
            stat = _proc_stat(str(pid)) if type(pid) is int and pid not in protected else None
            if stat is not None and stat[1] not in ("Z", "X") and not stat[4] & PF_KTHREAD:
                found[pid] = stat[3]
        return found

    def signal_all(sig: int) -> list[int]:
        found = targets()
        for pid, start in found.items():
            _signal_if_same(pid, start, sig)
        return sorted(found)

    def quiet() -> bool:
        until = time.monotonic() + quiet_s
        while time.monotonic() < until:
            if targets():
                return False
            time.sleep(0.1)
        return True

    # SIGKILL's phase is long: on a loaded machine Ray's raylet may still be forking workers.
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not signal_all(sig) and quiet():
                return []
            time.sleep(0.1)
    return sorted(targets())
