"""Download one file safely: into a temporary file in the target folder, renamed only once its
checksum matches; on any failure the temporary file is removed, so nothing half-written is left."""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import quote

from fedgc.errors import FedgcError
from fedgc.fetch.catalog import Entry
from fedgc.fetch.derive import DERIVE

if TYPE_CHECKING:
    from _hashlib import HASH  # what hashlib.new returns (hashlib's own name for it is private)

CHUNK = 1 << 20
TIMEOUT_S = 60
USER_AGENT = "fedgc-fetch/0.1"
_UMASK = os.umask(0o022)
os.umask(_UMASK)


class FetchError(FedgcError):
    """A file could not be fetched; the message is one line and says what was left on disk.
    ``unreachable``: no source could be reached or read (no network, a proxy, a missing mirror file),
    as opposed to a checksum mismatch or a local failure."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


def digest_of(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def is_present(entry: Entry, root: Path) -> bool:
    target = root / entry.path
    return target.is_file() and digest_of(target, entry.algorithm) == entry.digest


def urls_for(entry: Entry, mirror: str | None) -> list[str]:
    """The entry's own URLs, or the one under ``mirror`` (a base URL laid out like the data directory)."""
    if mirror:
        return [mirror.rstrip("/") + "/" + quote(entry.path)]
    return list(entry.urls)


def _write_checked(entry: Entry, target: Path, fill: Callable[[IO[bytes], HASH], None]) -> None:
    """Write through ``fill`` into a temporary file next to ``target``; rename it only if the checksum matches."""
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, removed unless renamed
        dir=target.parent, prefix=f".{target.name}.", suffix=".part", delete=False)
    part = Path(handle.name)
    try:
        h = hashlib.new(entry.algorithm)
        with handle:
            fill(handle, h)
        got = h.hexdigest()
        if got != entry.digest:
            raise FetchError(f"{entry.algorithm} mismatch (got {got[:16]}..., expected {entry.digest[:16]}...)")
        os.chmod(part, 0o666 & ~_UMASK)  # as an ordinary new file (temporary files are private)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def _download(entry: Entry, url: str, target: Path) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})

    def fill(handle: IO[bytes], h: HASH) -> None:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            for block in iter(lambda: response.read(CHUNK), b""):
                h.update(block)
                handle.write(block)

    _write_checked(entry, target, fill)


def fetch_entry(entry: Entry, root: Path, mirror: str | None) -> None:
    """Put ``entry`` at ``root/entry.path`` (verified), trying its URLs in order; FetchError if none works."""
    target = root / entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    source = entry.derived_from
    if source is not None:
        def fill(handle: IO[bytes], h: HASH) -> None:
            data = DERIVE[entry.path](root / source)
            h.update(data)
            handle.write(data)
        try:
            _write_checked(entry, target, fill)
        except Exception as err:  # noqa: BLE001 - a bad pickle can raise anything; reported in one line
            raise FetchError(f"{entry.path}: derived from {source}: {err}; nothing written") from None
        return
    failures, unreachable = [], True
    for url in urls_for(entry, mirror):
        try:
            _download(entry, url, target)
            return
        except FetchError as err:
            failures.append(f"{url}: {err}")
            unreachable = False
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", None) or err
            failures.append(f"{url}: {reason}")
    raise FetchError(f"{entry.path}: " + "; ".join(failures) + "; nothing written", unreachable=unreachable)
