"""The ``fedgc fetch`` command that gets a missing file or folder, for error messages.

A path whose last parts are those of a file ``fedgc fetch`` provides (``.../mnist/train-images-idx3-ubyte.gz``,
``.../traces/mahimahi/ATT-LTE-driving-2016.down``), or of one of its folders (``.../mnist``,
``.../leaf-shakespeare``), names the item that holds it and the data directory it would go to.
Light on purpose: imported by the data and network modules, it reads only ``files.tsv``.
"""

from __future__ import annotations

import os
import shlex
from functools import lru_cache
from pathlib import Path

from fedgc.fetch.catalog import load_entries
from fedgc.invocation import as_invoked


@lru_cache(maxsize=1)
def _provided() -> dict[tuple[str, ...], str]:
    """Every file path ``fedgc fetch`` provides and every folder above one: its parts → item."""
    known: dict[tuple[str, ...], str] = {}
    for entry in load_entries():
        parts = tuple(entry.path.split("/"))
        for end in range(1, len(parts) + 1):
            known.setdefault(parts[:end], entry.item)
    return known


def fetch_command(path: str | Path) -> str | None:
    """``fedgc fetch ITEM [--dir D]`` for a missing ``path`` that fetch provides, else None; the command
    written as this process was started (``fedgc.invocation``: ``.venv/bin/fedgc fetch ...``), so it runs.
    ``--dir`` is given unless D is where fetch writes by default (``$FEDGC_DATA_DIR`` or the user cache)."""
    from fedgc.scenario.paths import default_data_dir

    path = Path(os.path.abspath(Path(path).expanduser()))
    known = _provided()
    for start in range(1, len(path.parts)):  # the longest known tail wins
        item = known.get(path.parts[start:])
        if item is not None:
            root = Path(*path.parts[:start])
            where = "" if root == default_data_dir() else f" --dir {shlex.quote(str(root))}"
            return f"{as_invoked('fetch')} {item}{where}"
    return None


def fetch_hint(path: str | Path) -> str:
    """``"; get it with: fedgc fetch ITEM ..."`` to append to a missing-file message, or ``""``."""
    command = fetch_command(path)
    return f"; get it with: {command}" if command else ""
