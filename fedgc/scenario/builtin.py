"""The built-in scenarios, and ``fedgc scenarios``: list them, or copy one out to edit.

The scenarios ship inside the package as ``fedgc/scenarios/NAME.yaml`` (package data; in a checkout
``fedgc/scenarios`` is a link to the repository's ``scenarios/`` folder, so both paths hold the same
files). A built-in is named by its file's stem, which is also its ``name:``. Where a scenario file is
expected (``fedgc run``, ``fedgc check``, ``fedgc.Scenario.from_yaml``...), a bare name such as
``quickstart`` or ``quickstart.yaml`` that is no file in the current folder is the built-in of that
name (``fedgc.scenario.model.load_tree``). The first line of each built-in is ``# `` and its one-line
description, which ``fedgc scenarios`` lists.

    fedgc scenarios                      list the built-in scenarios, one line each
    fedgc scenarios copy NAME [DEST]     write the built-in NAME to DEST (default ./NAME.yaml; a folder:
                                         DEST/NAME.yaml), never over an existing file nor through a link
"""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import sys
from pathlib import Path

from fedgc.bounded import SCENARIO_MAX_BYTES, read_text
from fedgc.invocation import as_invoked

BUILT_IN_DIR = Path(__file__).resolve().parents[1] / "scenarios"
SUFFIX = ".yaml"


def names() -> list[str]:
    """The built-in scenarios' names, sorted."""
    if not BUILT_IN_DIR.is_dir():
        return []
    return sorted(p.stem for p in BUILT_IN_DIR.iterdir() if p.suffix == SUFFIX and p.is_file())


def built_in(text: str) -> Path | None:
    """The file of the built-in scenario ``text`` names (``NAME`` or ``NAME.yaml``, no folder), or None."""
    name = text.removesuffix(SUFFIX)
    return BUILT_IN_DIR / f"{name}{SUFFIX}" if name in names() else None


def description(name: str) -> str:
    """The built-in's one-line description: its first line, a comment (``""`` when it has none)."""
    path = built_in(name)
    if path is None:
        raise ValueError(f"{name!r} is not a built-in scenario (built-in: {', '.join(names())})")
    first = read_text(path, "scenario", SCENARIO_MAX_BYTES).partition("\n")[0]
    return first[2:].strip() if first.startswith("# ") else ""


def listing() -> str:
    """What ``fedgc scenarios`` prints."""
    all_names = names()
    if not all_names:
        return "no built-in scenarios in this installation of fedgc\n"
    width = max(map(len, all_names))
    rows = "".join(f"  {name:<{width}}  {description(name)}\n" for name in all_names)
    return (f"built-in scenarios (run one: {as_invoked('run')} NAME; edit one: {as_invoked('scenarios')} copy NAME):\n"
            + rows)


def copy(name: str, dest: str | None = None) -> Path:
    """Write the built-in ``name`` to ``dest`` (default ``./NAME.yaml``; an existing folder: into it as
    ``NAME.yaml``) and return the path written. Refused (``ValueError``, one line) where the
    target exists (a file, a folder, a link, even a dangling one) or ``dest`` is a link; nothing is
    written then."""
    source = built_in(name)
    if source is None:
        raise ValueError(f"{name!r} is not a built-in scenario (built-in: {', '.join(names())})")
    text = read_text(source, "scenario", SCENARIO_MAX_BYTES)
    target = Path(dest) if dest is not None else Path(source.name)
    if dest is not None and os.path.islink(target):
        raise ValueError(f"{target}: is a link; fedgc does not write through links (name a new file)")
    if target.is_dir():
        target = target / source.name
    if not target.parent.is_dir():
        raise ValueError(f"{target}: no such folder to write into ({target.parent})")
    try:  # O_EXCL: an existing file, or a link of any kind, is refused before a byte is written
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o644)
    except FileExistsError:
        raise ValueError(f"{target}: already exists; fedgc scenarios copy never overwrites it (name a new file)") from None
    except OSError as err:  # a link at the target (O_NOFOLLOW: ELOOP), a read-only folder...
        reason = "is a link; fedgc does not write through links" if err.errno == errno.ELOOP else err.strerror
        raise ValueError(f"{target}: cannot write ({reason})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as err:
        target.unlink(missing_ok=True)
        raise ValueError(f"{target}: cannot write ({err.strerror or 'write failed'})") from None
    return target


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fedgc scenarios",
        description="List the scenarios that ship with fedgc (fedgc run NAME runs one from any folder), or copy "
                    "one out to edit. Exit status 0, or 2 with a one-line error.")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    copy_parser = sub.add_parser("copy", help="write a built-in scenario to a file of yours, to edit",
                                 description="Write the built-in scenario NAME to DEST (default ./NAME.yaml; an "
                                             "existing folder: DEST/NAME.yaml). An existing file is never "
                                             "overwritten, and nothing is written through a link.")
    copy_parser.add_argument("name", metavar="NAME", help="a built-in scenario (fedgc scenarios lists them)")
    copy_parser.add_argument("dest", metavar="DEST", nargs="?", help="the new file, or a folder to write it into")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """``fedgc scenarios``; returns the exit code."""
    args = parse_args(argv)
    try:
        if args.action == "copy":
            written = copy(args.name, args.dest)
            print(f"wrote {written} (edit it, then: {as_invoked('run')} {shlex.quote(str(written))})")
        else:
            sys.stdout.write(listing())
    except (ValueError, OSError) as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return 2
    return 0
