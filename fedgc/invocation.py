"""The command a message tells its user to run, written as this process was started, so that it runs
when pasted: ``fedgc fetch mnist`` only when ``fedgc`` on ``PATH`` is this installation's command;
``.venv/bin/fedgc fetch mnist`` when the command was started by its path; ``.venv/bin/python -m
fedgc run --resume DIR`` after ``make run`` (``python -m fedgc run``), ``python -m fedgc.cli.run`` when
started as that module, and the same Python with ``-m fedgc`` for the other commands; from a notebook
or a script, this environment's ``fedgc`` (or its Python with ``-m fedgc``) when ``fedgc`` on ``PATH`` is
another one or none.

A path under the working directory is shown relative to it (``.venv/bin/fedgc``), as a user types it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from pathlib import Path

# The commands with a module of their own: ``python -m fedgc.cli.run`` is ``fedgc run``.
MODULES = {"run": "fedgc.cli.run", "fetch": "fedgc.fetch"}


def _same_file(a: str | None, b: str | Path) -> bool:
    if a is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _shown(path: str | Path) -> str:
    """``path`` as a user would type it here: relative to the working directory when under it."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return shlex.quote(str(absolute))
    text = str(relative)
    return shlex.quote(text if os.sep in text else f".{os.sep}{text}")


def _fedgc_command(script: str | Path) -> str:
    """``fedgc`` when ``PATH`` finds this very script, else the script's path."""
    return "fedgc" if _same_file(shutil.which("fedgc"), script) else _shown(script)


def _python() -> str:
    """This interpreter as the user typed it when ``PATH`` finds that same one, else its path."""
    typed = str(sys.orig_argv[0]) if sys.orig_argv else None
    if typed and os.sep not in typed and _same_file(shutil.which(typed), sys.executable):
        return typed
    return _shown(sys.executable)


def _started_module() -> str | None:
    """The module this process was started with (``python -m MODULE``), else None."""
    argv: list[str] = list(sys.orig_argv)
    for i, arg in enumerate(argv[1:-1], start=1):
        if arg == "-m":
            return argv[i + 1]
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:]
        if not arg.startswith("-"):
            return None  # a script: what follows is its arguments
    return None


def as_invoked(name: str) -> str:
    """How to run the fedgc command ``name`` (``run``, ``fetch``, ``report``...) from this process's
    working directory, without its arguments: e.g. ``fedgc run``, ``.venv/bin/fedgc run``,
    ``.venv/bin/python -m fedgc run``."""
    module = _started_module()
    if module is not None and (module == "fedgc" or module.startswith("fedgc.")):
        if module == MODULES.get(name):
            return f"{_python()} -m {module}"
        return f"{_python()} -m fedgc {name}"
    script = sys.argv[0] if sys.argv else ""
    if Path(script).stem == "fedgc" and os.path.isfile(script):  # the installed console script
        return f"{_fedgc_command(script)} {name}"
    # Anything else (a notebook, a script importing fedgc): this environment's command, else its Python.
    for beside in (Path(sys.executable).with_name("fedgc"), Path(sys.executable).with_name("fedgc.exe")):
        if beside.is_file():
            return f"{_fedgc_command(beside)} {name}"
    return f"{_python()} -m fedgc {name}"


_IMPORTED = time.monotonic()


def seconds_since_start() -> float:
    """Wall-clock seconds since this process started (Linux: its start time in ``/proc``; elsewhere since
    fedgc's command line was imported, which misses the interpreter's own start)."""
    try:
        with open("/proc/self/stat", "rb") as stat, open("/proc/uptime", "rb") as uptime:
            started_ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])  # field 22, after "pid (comm)"
            up_s = float(uptime.read().split()[0])
        return max(0.0, up_s - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED
