"""What runtime a run folder's run started, recorded in the folder, so that a later command on the same
folder can stop whatever of it is still alive (belt and braces beside ``fedgc.runs.process_guard``).

``<run>/flower-logs/runtime.json`` holds the runtime token every one of its processes carries in its
environment (``FEDGC_RUNTIME_TOKEN``, beside ``FEDGC_RUNTIME_FOLDER``: the run folder's device and
inode), the SuperLink's port, the pid of the fedgc process, and each started process's pid with its
start time. ``--resume`` of the folder and a new run into it with ``--overwrite`` call
:func:`stop_leftovers` first. The file is input like any other, written by whoever could write the
folder: a pid and a start time in it prove nothing (a start time is public, ``/proc/PID/stat``). So
it stops only processes it can prove are this folder's runtime: those whose own environment holds
the recorded token *and* this folder's identity (``/proc/PID/environ`` is readable for this user's
processes only), and the descendants of those (Ray writes some processes' titles over their
environment); never pid 1, this process or its ancestors, or a kernel thread
(``fedgc.runs.process_tree.terminate``). It says so in one line. The record is read with a size bound,
never through a link, and ignored (with no process touched) when it is not what fedgc writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedgc.bounded import open_no_follow, read_bytes, replace_no_follow
from fedgc.runs.process_tree import Family, folder_identity, proc_start_time, terminate, token_holders

RECORD = Path("flower-logs") / "runtime.json"
MAX_RECORD_BYTES = 64 * 1024
_TOKEN = re.compile(r"[0-9a-f]{32}")


def write_record(folder: Path, token: str, port: int, processes: dict[str, int]) -> None:
    """Record the runtime started for ``folder`` (``processes``: name -> pid, each alive now)."""
    entries = [{"name": name, "pid": pid, "start": proc_start_time(pid)} for name, pid in processes.items()]
    record = {"token": token, "port": port, "fedgc_pid": os.getpid(), "fedgc_start": proc_start_time(os.getpid()),
              "processes": [e for e in entries if e["start"] is not None]}
    path = folder / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open_no_follow(tmp, "w") as f:
        f.write(json.dumps(record))
    replace_no_follow(tmp, path)


def _read(folder: Path) -> dict[str, Any] | None:
    path = folder / RECORD
    try:
        if path.parent.is_symlink() or path.is_symlink() or not path.is_file():
            return None
        record = json.loads(read_bytes(path, "runtime record", MAX_RECORD_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("token"), str) or not _TOKEN.fullmatch(record["token"]):
        return None
    processes = record.get("processes")
    if not isinstance(processes, list) or len(processes) > 64:
        return None
    for entry in processes:
        if not isinstance(entry, dict):
            return None
        pid, start = entry.get("pid"), entry.get("start")
        if type(pid) is not int or type(start) is not int or not 1 < pid < 2**22 or start < 0:
            return None
    return record


def _finder(record: dict[str, Any], folder: Path) -> Callable[[], list[int]]:
    """What of the recorded runtime is alive, proven: the processes holding its token and this folder's
    identity in their own environment, and their descendants (remembered as they are re-parented while
    they are stopped). The recorded pids are not trusted: a recorded process is found only by proof."""
    family = Family([])
    identity = folder_identity(folder)

    def find() -> list[int]:
        for pid in token_holders(record["token"], identity):
            family.add(pid)
        return family.members()

    return find


def leftovers(folder: Path) -> list[int]:
    """The live processes of the runtime recorded in ``folder`` (none if no valid record, or no /proc)."""
    record = _read(folder)
    if record is None or not os.path.isdir("/proc"):
        return []
    try:
        return _finder(record, folder)()
    except OSError:
        return []


def stop_all_leftovers(folder: Path, in_use: Callable[[Path], bool]) -> list[str]:
    """:func:`stop_leftovers` for a run folder or a sweep folder (whose points are its subfolders);
    ``in_use(point)``: whether another process holds a point's folder (``fedgc.runs.folder``'s lock)."""
    if not folder.is_dir():
        return []
    candidates = [folder]
    try:
        points = sorted(p.parent.parent for p in folder.glob(f"*/{RECORD}"))[:10_000]
    except OSError:
        points = []
    # A point folder that is a link (to a folder elsewhere), or that another process holds (a run
    # writing it now), is not this sweep's leftover.
    candidates += [p for p in points if not p.is_symlink() and not in_use(p)]
    return [line for c in candidates if (line := stop_leftovers(c)) is not None]


def stop_leftovers(folder: Path) -> str | None:
    """Stop what is left of the runtime an earlier run of ``folder`` started; a one-line account of
    what was stopped, or None when nothing was running."""
    record = _read(folder)
    if record is None or not os.path.isdir("/proc"):
        return None
    try:
        find = _finder(record, folder)
    except OSError:
        return None
    found = find()
    if not found:
        return None
    survivors = terminate(find, grace_s=5.0)
    port = record.get("port")
    where = f" (its SuperLink on port {port})" if type(port) is int else ""
    left = f"; {len(survivors)} could not be stopped: {survivors}" if survivors else ""
    return f"stopped {len(found)} process(es) an earlier run of {folder} left running{where}{left}"
