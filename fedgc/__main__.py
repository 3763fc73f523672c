"""``python -m fedgc COMMAND ...``: the ``fedgc`` command (``fedgc.cli``).

``python -m`` puts the working directory first on ``sys.path``, so a module lying there (one shipped
next to a scenario, or named like a package fedgc imports: ``yaml.py``, ``torch.py``) would be
imported in its place. The commands that only read (``check`` without ``--deep``, ``report``, ``scenarios``) drop it,
as the installed ``fedgc`` command never has it; ``run`` and ``check --deep`` keep it, for the
scenario's import paths (docs/api.md)."""

import os
import sys

READ_ONLY = ("check", "report", "scenarios")
RUNS_PLUGINS = ("--deep", "--sweep", "--seeds")


def reads_only(argv: list[str]) -> bool:
    """Whether ``fedgc argv...`` only reads: nothing it does imports from the working directory."""
    return bool(argv) and argv[0] in READ_ONLY and not any(
        a == flag or a.startswith(flag + "=") for a in argv[1:] for flag in RUNS_PLUGINS)


if __name__ == "__main__":
    if reads_only(sys.argv[1:]) and sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    from fedgc.cli import main

    sys.exit(main())
