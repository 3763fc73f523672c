"""Temporary folders owned by this process, named after it (the inline engine keeps a disk client-state
store in one when a run has no run folder, ``fedgc.run(out=None)``), and the removal of such folders
that killed processes left behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


class TemporaryFolder:
    """A folder ``<prefix><pid>-<random>`` in the system's temporary folder, removed by ``cleanup``.
    Its name carries this process's id: a process killed by a signal cannot remove its folder, so each
    new one first removes the folders with its prefix whose processes are gone (``remove_abandoned``)."""

    def __init__(self, prefix: str) -> None:
        remove_abandoned(prefix)
        self._dir = tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-")
        self.path = Path(self._dir.name)

    def cleanup(self) -> None:
        self._dir.cleanup()


def remove_abandoned(prefix: str, root: Path | None = None) -> list[Path]:
    """Remove this user's ``prefix`` folders whose process is gone (killed before it could); returns
    them. A folder whose process id is alive (maybe reused) is left alone."""
    root = Path(tempfile.gettempdir()) if root is None else root
    removed = []
    for folder in root.glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix):].split("-", 1)[0]
        try:
            if not pid.isdigit() or folder.is_symlink() or folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
            continue  # alive
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except OSError:  # PermissionError: another user's live process; a folder gone meanwhile
            continue
    return removed
