"""Reading the files a user names, with bounds checked before anything is allocated: a regular file
only (a FIFO would block the reader for good, ``/dev/zero`` never ends), at most ``limit`` bytes (the
size is checked before reading, and no more than ``limit + 1`` bytes are ever read). Errors are one
line (``ValueError`` naming the file and what is wrong). And writing: :func:`writing` names the file a
failed write (a full disk) was for."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

MiB = 1024 * 1024
SCENARIO_MAX_BYTES = 1 * MiB  # a scenario or sweep plan; the shipped ones are under 4 KiB
TABLE_MAX_BYTES = 256 * MiB  # a trace, device or availability table; the shared traces are under 5 MiB


def read_bytes(path: str | Path, what: str, limit: int) -> bytes:
    """The contents of the regular file ``path`` (``what``: how errors name it), at most ``limit`` bytes."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ValueError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{what} {path}: is a directory") from None
    except OSError as err:
        raise ValueError(f"{what} {path}: cannot open ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ValueError(f"{what} {path}: is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{what} {path}: not a regular file (a FIFO, socket or device is not read)")
        if info.st_size > limit:
            raise ValueError(f"{what} {path}: {info.st_size} bytes, more than the {limit} this file may hold")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(limit + 1 - total, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise ValueError(f"{what} {path}: more than the {limit} bytes this file may hold")
        return b"".join(chunks)
    except OSError as err:
        raise ValueError(f"{what} {path}: cannot read ({err.strerror})") from None
    finally:
        os.close(fd)


def read_text(path: str | Path, what: str, limit: int, encoding: str = "utf-8") -> str:
    data = read_bytes(path, what, limit)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        raise ValueError(f"{what} {path}: cannot read (not {encoding} text)") from None


@contextlib.contextmanager
def writing(path: str | Path):
    """Errors while writing ``path`` (a full disk: ``ENOSPC``, or PyTorch's ``RuntimeError`` for a short
    write) become one ``OSError`` line naming the file."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror or str(err).splitlines()[0], str(path)) from None
    except RuntimeError as err:
        first = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise OSError(errno.EIO, f"write failed, is the disk full? ({first})", str(path)) from None
