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
  that locked the file just as it was removed sees it is gone and locks the new one.

Before a folder is resumed or overwritten, whatever is still alive of a runtime an earlier run of it
started (``fedgc.runtime_record``) is stopped, with one line on stderr.

Every ``RunFolderError`` is one line (the CLI prints it with exit code 2).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import time
from pathlib import Path

LOCK_NAME = ".fedgc.lock"
CHECKPOINT = "checkpoint.pt"  # a run's last checkpoint (fedgc.core.checkpoint writes it)
FEDGC_MARKERS = ("scenario.yaml", "report.md", "sweep.yaml", "comparison.md", LOCK_NAME)  # comparison.md: --baseline


class RunFolderError(ValueError):
    """A run folder cannot be used; ``str(err)`` is one line."""


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
        try:
            fd = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise RunFolderError(f"{self.folder}: cannot create its lock file ({err.strerror})") from None
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
            on_disk = os.stat(self.folder / LOCK_NAME)
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

    def __exit__(self, *exc) -> None:
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
    was_fedgc = folder.is_dir() and any((folder / m).exists() for m in FEDGC_MARKERS)
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
    """Lock a run folder that must already exist (``--resume``)."""
    if not folder.is_dir():
        raise RunFolderError(f"--resume {folder}: no such run folder")
    lock = RunLock(folder)
    _stop_leftovers(folder)
    return lock


def _stop_leftovers(folder: Path) -> None:
    """A runtime an earlier, killed run of this folder started and that is somehow still running
    (fedgc.runtime_record) is stopped before the folder is used again, in one line each."""
    from fedgc.runtime_record import stop_all_leftovers

    for line in stop_all_leftovers(folder):
        print(line, file=sys.stderr)
