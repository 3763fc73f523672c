"""Run folders: each run writes a folder of its own, and one process at a time writes a folder.

- ``new_run_folder``: the default ``runs/<name>-<timestamp>`` is created with ``mkdir`` (which fails if
  the folder exists, atomically), with ``-2``, ``-3``, ... appended on a collision, so two runs started
  in the same second get two folders. An explicit ``--out`` is used if it is missing or empty; a folder
  holding anything is refused, unless ``overwrite``, which clears it first (only a folder that looks
  like fedgc's: it holds ``scenario.yaml``, ``report.md``, ``comparison.md`` or the lock file; never an
  arbitrary folder).
- ``RunLock``: an exclusive ``fcntl.flock`` on ``<folder>/.fedgc.lock``, held while a run (or a resume,
  or a sweep) writes the folder. A second process gets ``RunFolderError`` at once. The kernel drops
  the lock when the process ends, however it ends, so a killed run never leaves a stale lock. The
  holder removes the file as it releases the lock (a killed run leaves the file, unlocked); a process
  that locked the file just as it was removed sees it is gone and locks the new one. The lock file is
  opened without following links (``O_NOFOLLOW``): a link named ``.fedgc.lock`` is refused, and the
  file it points to is never truncated or written.
- ``lock_existing`` (``--resume``) takes only a folder that is fedgc's (it holds a ``scenario.yaml``
  or ``sweep.yaml`` that is a regular file) and none of whose run files is a link; any other folder is
  refused before anything in it is created, read or stopped.

Before a folder is resumed or overwritten, whatever is still alive of a runtime an earlier run of it
started (``fedgc.runs.runtime_record``) is stopped, with one line on stderr.

Every ``RunFolderError`` is one line (the CLI prints it with exit code 2).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import sys
import time
from pathlib import Path

from fedgc.bounded import LINK_REFUSED
from fedgc.errors import RunFolderError

LOCK_NAME = ".fedgc.lock"
CHECKPOINT = "checkpoint.pt"  # a run's last checkpoint (fedgc.core.checkpoint writes it)
FEDGC_MARKERS = ("scenario.yaml", "report.md", "sweep.yaml", "comparison.md", LOCK_NAME)  # comparison.md: --baseline


# The files a run writes in its folder (docs/metrics.md): on --resume, one of them that is a link (to a
# file elsewhere) is refused before anything is written.
RUN_FILES = ("scenario.yaml", "sweep.yaml", CHECKPOINT, CHECKPOINT + ".tmp", "metrics.jsonl", "metrics.jsonl.tmp",
             "clients.jsonl", "clients.jsonl.tmp", "failures.jsonl", "failures.jsonl.tmp", "summary.json",
             "summary.json.tmp", "model.pt", "model.pt.tmp", "report.md", "comparison.md", "client-state.sqlite",
             "client-state.sqlite-journal", "client-state.sqlite-wal", "client-state.sqlite-shm", "flower-logs")


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (not a link to one)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_fedgc(folder: Path) -> bool:
    return folder.is_dir() and any(_regular(folder / m) for m in FEDGC_MARKERS)


class RunLock:
    """An exclusive lock on a run folder for the life of this object (or of the process)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        for _ in range(100):  # a holder that removes the file as we open it: open the new one
            fd = self._open_and_lock()
            if self._same_file(fd):
                break
            os.close(fd)
        else:
            raise RunFolderError(f"{folder}: its lock file keeps being replaced; try again")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as err:
            os.close(fd)
            raise RunFolderError(f"{folder / LOCK_NAME}: cannot write the lock file ({err.strerror})") from None
        self._fd: int | None = fd

    def _open_and_lock(self) -> int:
        path = self.folder / LOCK_NAME
        try:  # never through a link: the file a link points to is not truncated or written
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RunFolderError(f"{path}: {LINK_REFUSED}") from None
            raise RunFolderError(f"{self.folder}: cannot create its lock file ({err.strerror})") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            what = "not a regular file" if not stat.S_ISREG(info.st_mode) else "a file with another hard link"
            raise RunFolderError(f"{path}: {what}; fedgc does not write through it (remove it, or use another folder)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunFolderError(f"{self.folder} is in use by another fedgc process (pid {holder}); "
                                 "wait for it to end, or use another folder") from None
        return fd

    def _same_file(self, fd: int) -> bool:
        """Whether ``fd`` is still the folder's lock file (a holder that ended removed the one it
        locked: a lock on that removed file would protect nothing)."""
        try:
            on_disk = os.lstat(self.folder / LOCK_NAME)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        """Remove the lock file (only while holding its lock, and only if it is still ours), then drop the lock."""
        if self._fd is not None:
            try:
                if self._same_file(self._fd):
                    os.unlink(self.folder / LOCK_NAME)
            except OSError:
                pass  # the folder is gone or read-only: the lock is dropped all the same
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:  # noqa: PYI034 — typing.Self needs Python 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _contents(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name != LOCK_NAME]


def _clear(folder: Path) -> None:
    for path in _contents(folder):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def claim_folder(folder: Path, *, overwrite: bool = False) -> RunLock:
    """Create ``folder`` (or take it when empty), lock it and return the lock. A folder that holds
    anything is refused, or with ``overwrite`` cleared (after the lock is held, so a running run's
    folder is never cleared)."""
    if folder.exists() and not folder.is_dir():
        raise RunFolderError(f"--out {folder}: exists and is not a folder")
    was_fedgc = _is_fedgc(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunFolderError(f"--out {folder}: cannot create it ({err.strerror})") from None
    lock = RunLock(folder)
    try:
        if _contents(folder):
            if overwrite and was_fedgc:
                _stop_leftovers(folder)
            if not overwrite:
                raise RunFolderError(f"--out {folder} already holds files (another run's?): choose a new "
                                     "folder, or add --overwrite to clear it first")
            if not was_fedgc:
                raise RunFolderError(f"--out {folder} holds files but is not a fedgc run or sweep folder: "
                                     "--overwrite clears only those; choose another folder")
            _clear(folder)
    except BaseException:
        lock.release()
        raise
    return lock


def new_run_folder(name: str, parent: Path = Path("runs")) -> tuple[Path, RunLock]:
    """A folder ``parent/<name>-<timestamp>[-N]`` that did not exist before this call, locked."""
    base = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunFolderError(f"{parent}: cannot create it ({err.strerror})") from None
    for number in range(1, 10_000):
        folder = parent / (base if number == 1 else f"{base}-{number}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except OSError as err:
            raise RunFolderError(f"{folder}: cannot create it ({err.strerror})") from None
        return folder, RunLock(folder)
    raise RunFolderError(f"{parent}: no free folder name for {base}")


def lock_existing(folder: Path) -> RunLock:
    """Lock a run folder that must already exist (``--resume``): only a fedgc run or sweep folder, none
    of whose run files is a link; any other is refused before anything in it is touched."""
    if not folder.is_dir():
        raise RunFolderError(f"--resume {folder}: no such run folder")
    if not any(_regular(folder / m) for m in ("scenario.yaml", "sweep.yaml")):
        raise RunFolderError(f"--resume {folder}: not a fedgc run or sweep folder (no scenario.yaml or sweep.yaml "
                             "in it); nothing in it was touched")
    for name in (LOCK_NAME, *RUN_FILES):
        if (folder / name).is_symlink():
            raise RunFolderError(f"--resume {folder}: its {name} {LINK_REFUSED}")
    lock = RunLock(folder)
    try:
        _stop_leftovers(folder)
    except BaseException:
        lock.release()
        raise
    return lock


def _stop_leftovers(folder: Path) -> None:
    """A runtime an earlier, killed run of this folder started and that is somehow still running
    (fedgc.runs.runtime_record) is stopped before the folder is used again, in one line each."""
    from fedgc.runs.runtime_record import stop_all_leftovers

    for line in stop_all_leftovers(folder, held_by_another):
        print(line, file=sys.stderr)


def held_by_another(folder: Path) -> bool:
    """Whether another process holds ``folder``'s run lock (``RunLock``) now."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file (or a link, which no fedgc process holds): nobody holds the folder
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
