"""How the files a scenario names are found: one rule, applied when the scenario is loaded.

* ``${NAME}`` in a path is the environment variable ``NAME``; ``${NAME:-default}`` uses ``default``
  when ``NAME`` is unset or empty. A variable's own value, when relative, is relative to the
  current directory (as any environment setting); an unset variable without a default is an error.
* A relative path written in a scenario file is relative to **the directory of that file**; a
  relative path given on the command line (``--set``) or in a tree passed to
  :func:`fedgc.scenario.model.validate` is relative to the current directory.
* Trace, capacity and availability files are relative to ``network.trace_dir`` when it is set
  (itself resolved as above).
* ``${FEDGC_DATA_DIR}`` and ``${FEDGC_TRACE_DIR}`` (written without a default) always resolve, to the
  data directory that ``fedgc fetch`` fills (:func:`data_dir`): the environment variable when set;
  else ``$FEDGC_SHARED_DIR/data`` (``/traces``) when that is set; else the user cache directory
  (:func:`user_cache_dir`) when it holds the file named after the variable; else ``../shared/data``
  (``/traces``) next to the source checkout when it holds it (this repository's development setup);
  else the cache directory (so a missing file is reported there). ``FEDGC_TRACE_DIR`` is
  ``<data directory>/traces``. docs/data.md.

The loaded scenario holds absolute paths only, so the ``scenario.yaml`` copied into a run folder
finds the same files from any directory (``--resume``).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from fedgc.errors import FedgcError

# The scenario keys that name files or directories, as key paths; the network's in its tagged form
# (network.link.down) and its flat form (network.trace_down), which fedgc.network.flat_form folds.
PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("data", "root"), ("network", "trace_dir"),
    ("network", "link", "down"), ("network", "link", "up"), ("network", "link", "bandwidth_file"),
    ("network", "device", "file"), ("network", "availability", "file"),
    ("network", "trace_down"), ("network", "trace_up"), ("network", "bandwidth_file"), ("network", "device_file"),
    ("network", "availability_file"),
)
# Relative to network.trace_dir when that is set: every network file but trace_dir itself.
UNDER_TRACE_DIR = {key for key in PATH_KEYS if key[0] == "network" and key != ("network", "trace_dir")}

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class PathError(FedgcError, ValueError):
    """A path in the scenario cannot be expanded; the message names the key."""


DATA_VARS = {"FEDGC_DATA_DIR": "data", "FEDGC_TRACE_DIR": "traces"}  # variable: its folder in ../shared


def user_cache_dir() -> Path:
    """Where ``fedgc fetch`` puts files by default: ``%LOCALAPPDATA%\\fedgc\\Cache`` (Windows),
    ``~/Library/Caches/fedgc`` (macOS), else ``$XDG_CACHE_HOME/fedgc`` or ``~/.cache/fedgc``."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser(r"~\AppData\Local")
        return Path(base) / "fedgc" / "Cache"
    if sys.platform == "darwin":
        return Path(os.path.expanduser("~/Library/Caches")) / "fedgc"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.cache")
    return Path(base) / "fedgc"


def default_data_dir() -> Path:
    """Where ``fedgc fetch`` writes when no ``--dir`` is given: ``$FEDGC_DATA_DIR``, else the user cache."""
    found = os.environ.get("FEDGC_DATA_DIR")
    return Path(os.path.abspath(os.path.expanduser(found))) if found else user_cache_dir()


def checkout_shared_dir() -> Path | None:
    """``../shared`` next to the source checkout this package runs from (a development setup), if any."""
    repo = Path(__file__).resolve().parents[2]
    shared = repo.parent / "shared"
    return shared if (repo / "pyproject.toml").is_file() and shared.is_dir() else None


def data_dir(name: str = "FEDGC_DATA_DIR", rest: str = "") -> Path:
    """The folder ``${FEDGC_DATA_DIR}`` / ``${FEDGC_TRACE_DIR}`` stands for, when followed by ``rest``."""
    traces = name == "FEDGC_TRACE_DIR"
    for var in ([name] if not traces else [name, "FEDGC_DATA_DIR"]):
        found = os.environ.get(var)
        if found:
            path = Path(os.path.abspath(os.path.expanduser(found)))
            return path / "traces" if var != name else path
    found = os.environ.get("FEDGC_SHARED_DIR")
    if found:
        return Path(os.path.abspath(os.path.expanduser(found))) / DATA_VARS[name]
    rest = rest.strip("/\\")
    cache = user_cache_dir() / ("traces" if traces else "")
    if (cache / rest).exists():
        return cache
    shared = checkout_shared_dir()
    if shared is not None and (shared / DATA_VARS[name] / rest).exists():
        return shared / DATA_VARS[name]
    return cache


def expand(value: str, where: str) -> str:
    """Substitute ``${NAME}`` / ``${NAME:-default}``; ``~`` is the home directory."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in DATA_VARS and default is None:
            rest = _VAR.split(match.string[match.end():], maxsplit=1)[0]
            return str(data_dir(name, rest))
        found = os.environ.get(name)
        if found:
            return os.path.abspath(os.path.expanduser(found))
        if default is not None:
            return default
        raise PathError(f"{where}: environment variable {name} is not set "
                        f"(set it, or write a default: ${{{name}:-some/dir}})")

    text = _VAR.sub(substitute, value)
    if "${" in text:
        raise PathError(f"{where}: malformed ${{...}} in {value!r} (expected ${{NAME}} or ${{NAME:-default}})")
    return os.path.expanduser(text)


def _absolute(value: str, base: Path) -> str:
    path = Path(value)
    return value if path.is_absolute() else os.path.abspath(base / path)


def _one(value: Any, where: str, anchored: bool, base: Path) -> Any:
    if not isinstance(value, str) or not value:
        return value
    value = expand(value, where)
    return value if anchored else _absolute(value, base)


def resolve_paths(tree: dict[str, Any], base: Path) -> None:
    """Expand variables in every path key of ``tree`` and make relative paths absolute from ``base``.

    Values that are not strings (or lists of strings) are left for the schema to reject; empty
    strings are left alone.
    """
    base = Path(os.path.abspath(base))
    network = tree.get("network")
    trace_dir_set = isinstance(network, dict) and network.get("trace_dir") not in (None, "")
    for path in PATH_KEYS:
        section: Any = tree
        for part in path[:-1]:
            section = section.get(part) if isinstance(section, dict) else None
        key = path[-1]
        if not isinstance(section, dict) or key not in section:
            continue
        where = ".".join(path)
        anchored = path in UNDER_TRACE_DIR and trace_dir_set
        value = section[key]
        if isinstance(value, list):
            section[key] = [_one(v, where, anchored, base) for v in value]
        else:
            section[key] = _one(value, where, anchored, base)
