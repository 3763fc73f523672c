"""``fedgc fetch traces|mnist|fashion-mnist|shakespeare|all [--dir D]``: download the public data sets
and network traces fedgc's scenarios use, check each file's checksum, and put them in the data
directory (``--dir``, else ``$FEDGC_DATA_DIR``, else the user cache: :func:`fedgc.scenario.paths.user_cache_dir`).

Idempotent: files already there with the right checksum are not downloaded again. A download goes
to a temporary file in the target folder and is renamed only once its checksum matches; a mismatch
or a failed download is a one-line error (exit status 2) and leaves no partial file behind.
``--mirror URL`` (or ``$FEDGC_FETCH_MIRROR``) downloads every file from ``URL/<path in the data
directory>`` instead of its original source, e.g. a ``file://`` copy for offline use and tests.
docs/data.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

from fedgc.fetch.catalog import ABOUT, ITEMS, Entry, entries_for
from fedgc.fetch.download import FetchError, fetch_entry, is_present
from fedgc.invocation import as_invoked
from fedgc.scenario.paths import default_data_dir

WORKERS = 8
__all__ = ["FetchError", "fetch", "main"]


def _remove_empty(folders: list[Path]) -> None:
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()
        except OSError:
            pass  # not empty, or gone


def fetch_item(entries: list[Entry], root: Path, mirror: str | None) -> tuple[int, int]:
    """Fetch one item's files; (downloaded, already present). Folders it created stay only if it succeeds."""
    created = sorted({p for e in entries for p in (root / e.path).parents if not p.exists()})
    missing = [e for e in entries if not is_present(e, root)]
    downloads = [e for e in missing if e.derived_from is None]
    try:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            futures = [pool.submit(fetch_entry, e, root, mirror) for e in downloads]
            errors = []
            for future in futures:
                if future.cancelled():
                    continue
                try:
                    future.result()
                except FetchError as err:
                    errors.append(err)
                    for other in futures:
                        other.cancel()
        if errors:
            raise errors[0]
        for entry in missing:
            if entry.derived_from is not None:
                fetch_entry(entry, root, mirror)
    except BaseException:
        _remove_empty(created)
        raise
    return len(missing), len(entries) - len(missing)


def _size(entries: list[Entry], root: Path) -> str:
    total = sum((root / e.path).stat().st_size for e in entries)
    return f"{total / 1e6:.1f} MB"


def fetch(items: list[str], root: Path, mirror: str | None = None, out: TextIO | None = None) -> None:
    """Fetch ``items`` into ``root``, printing what was got and its licence and citation."""
    out = out or sys.stdout
    for item, entries in entries_for(items).items():
        got, present = fetch_item(entries, root, mirror)
        where = sorted({(root / e.path.split("/")[0]) for e in entries})
        print(f"{item}: {got} downloaded, {present} already there ({len(entries)} files, {_size(entries, root)}) "
              f"in {', '.join(map(str, where))}", file=out)
        for line in ABOUT[item]:
            print(f"  {line}", file=out)


def offline_help(root: Path, mirror: str | None) -> str:
    """What to do when the sources cannot be reached (no network, a proxy, a dead mirror)."""
    first = ("check the mirror: it must hold each file at MIRROR/<its path in the data directory>" if mirror else
             "no network? fetch from a mirror laid out like the data directory (e.g. a copy of another "
             f"machine's): {as_invoked('fetch')} ITEM --mirror file:///media/usb/fedgc-data (or an https:// URL)")
    return (f"  {first};\n  or copy the files by hand into {root}/ at the paths listed in fedgc/fetch/files.tsv, "
            f"then run the same {as_invoked('fetch')} command to check their checksums; see docs/data.md")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fedgc fetch", epilog="Sources, checksums, licences and citations: docs/data.md.",
        description="Download the data sets and network traces fedgc's scenarios use, check each file's "
                    "checksum and put them in the data directory. Files already there with the right checksum "
                    "are not downloaded again; a failure is a one-line error (exit status 2).")
    parser.add_argument("items", nargs="+", choices=[*ITEMS, "all"], metavar="ITEM",
                        help=f"what to fetch: {', '.join(ITEMS)} or all")
    parser.add_argument("--dir", type=Path, default=None,
                        help=f"data directory (default: $FEDGC_DATA_DIR, else {default_data_dir()})")
    parser.add_argument("--mirror", "--base-url", dest="mirror", default=os.environ.get("FEDGC_FETCH_MIRROR") or None,
                        help="download every file from MIRROR/<path in the data directory> instead of its source "
                             "(default: $FEDGC_FETCH_MIRROR)")
    args = parser.parse_args(argv)
    items = list(ITEMS) if "all" in args.items else list(dict.fromkeys(args.items))
    root = Path(os.path.abspath(args.dir.expanduser())) if args.dir else default_data_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        fetch(items, root, args.mirror)
    except FetchError as err:
        print(f"fedgc fetch: error: {err}", file=sys.stderr)
        if err.unreachable:
            print(offline_help(root, args.mirror), file=sys.stderr)
        return 2
    except OSError as err:
        print(f"fedgc fetch: error: {root}: {err.strerror or err}", file=sys.stderr)
        return 2
    if root != default_data_dir():
        print(f"Scenarios find these files with FEDGC_DATA_DIR={root}")
    return 0
