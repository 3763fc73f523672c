"""What runtime a run folder's run started, recorded in the folder, so that a later command on the same
folder can stop whatever of it is still alive (belt and braces beside ``fedgc.process_guard``).

``<run>/flower-logs/runtime.json`` holds the runtime token every one of its processes carries in its
environment (``FEDGC_RUNTIME_TOKEN``), the SuperLink's port, the pid of the fedgc process, and each
started process's pid with its start time. ``--resume`` of the folder and a new run into it with
``--overwrite`` call :func:`stop_leftovers` first: it stops the processes that still hold that token,
and those recorded processes (and their descendants) whose start time still matches — never a
process that merely reuses a pid — and says so in one line. The file is input like any other: read
with a size bound, and ignored (with no process touched) when it is not what fedgc writes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from fedgc.process_tree import Family, proc_start_time, terminate, token_holders

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
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)


def _read(folder: Path) -> dict | None:
    path = folder / RECORD
    try:
        if not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
            return None
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("token"), str) or not _TOKEN.fullmatch(record["token"]):
        return None
    processes = record.get("processes")
    if not isinstance(processes, list) or len(processes) > 64:
        return None
    known = {}
    for entry in processes:
        if not isinstance(entry, dict):
            return None
        pid, start = entry.get("pid"), entry.get("start")
        if type(pid) is not int or type(start) is not int or not 1 < pid < 2**22 or start < 0:
            return None
        known[pid] = start
    record["known"] = known
    return record


def _finder(record: dict):
    family = Family([], known=record["known"])
    return lambda: sorted(set(token_holders(record["token"])) | set(family.members()))


def leftovers(folder: Path) -> list[int]:
    """The live processes of the runtime recorded in ``folder`` (none if no valid record, or no /proc)."""
    record = _read(folder)
    if record is None or not os.path.isdir("/proc"):
        return []
    return _finder(record)()


def stop_all_leftovers(folder: Path) -> list[str]:
    """:func:`stop_leftovers` for a run folder or a sweep folder (whose points are its subfolders)."""
    if not folder.is_dir():
        return []
    candidates = [folder]
    try:
        candidates += sorted(p.parent.parent for p in folder.glob(f"*/{RECORD}"))[:10_000]
    except OSError:
        pass
    return [line for c in candidates if (line := stop_leftovers(c)) is not None]


def stop_leftovers(folder: Path) -> str | None:
    """Stop what is left of the runtime an earlier run of ``folder`` started; a one-line account of
    what was stopped, or None when nothing was running."""
    record = _read(folder)
    if record is None or not os.path.isdir("/proc"):
        return None
    find = _finder(record)
    found = find()
    if not found:
        return None
    survivors = terminate(find, grace_s=5.0)
    port = record.get("port")
    where = f" (its SuperLink on port {port})" if type(port) is int else ""
    left = f"; {len(survivors)} could not be stopped: {survivors}" if survivors else ""
    return f"stopped {len(found)} process(es) an earlier run of {folder} left running{where}{left}"
