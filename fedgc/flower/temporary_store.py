"""A temporary folder for a disk client-state store (``fedgc.flower.disk_store``) when a run has no run
folder (``fedgc.run(out=None)``), and the removal of such folders that killed processes left behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from fedgc.flower.disk_store import release_under

TEMPORARY_PREFIX = "fedgc-client-state-"


class TemporaryStoreDir:
    """A folder for a disk store when the run has none (``out=None``), removed when the run's grid goes.
    Its name carries this process's id: a process killed by a signal cannot remove its folder, so each
    new one first removes the folders of processes that are gone (``remove_abandoned``)."""

    def __init__(self) -> None:
        remove_abandoned()
        self._dir = tempfile.TemporaryDirectory(prefix=f"{TEMPORARY_PREFIX}{os.getpid()}-")
        self.path = Path(self._dir.name)

    def cleanup(self) -> None:
        release_under(self.path)
        self._dir.cleanup()


def remove_abandoned(root: Path | None = None) -> list[Path]:
    """Remove this user's temporary store folders whose process is gone (killed before it could);
    returns them. A folder whose process id is alive (maybe reused) is left alone."""
    root = Path(tempfile.gettempdir()) if root is None else root
    removed = []
    for folder in root.glob(f"{TEMPORARY_PREFIX}*-*"):
        pid = folder.name[len(TEMPORARY_PREFIX):].split("-", 1)[0]
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
