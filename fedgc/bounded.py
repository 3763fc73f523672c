"""Reading the files a user names, with bounds checked before anything is allocated: a regular file
only (a FIFO would block the reader for good, ``/dev/zero`` never ends), at most ``limit`` bytes (the
size is checked before reading, and no more than ``limit + 1`` bytes are ever read). Errors are one
line (``ValueError`` naming the file and what is wrong). And writing: :func:`writing` names the file a
failed write (a full disk) was for; :func:`open_no_follow` and :func:`replace_no_follow` write a run
folder's files never through a link (a symbolic link, or a second hard link, planted where a file of
the folder goes is refused in one ``OSError`` line naming it, and the file it points to is untouched)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
def writing(path: str | Path) -> Iterator[None]:
    """Errors while writing ``path`` (a full disk: ``ENOSPC``, or PyTorch's ``RuntimeError`` for a short
    write) become one ``OSError`` line naming the file, with the OS's reason ("No space left on
    device") where PyTorch's error hides one (``os_error_behind``), never PyTorch's internal text."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror or str(err).splitlines()[0], str(path)) from None
    except RuntimeError as err:
        behind = os_error_behind(err)
        if behind is not None and behind.errno:  # PyTorch's writer failed on a write of ours: the OS's own reason
            raise OSError(behind.errno, os.strerror(behind.errno), str(path)) from None
        first = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise OSError(errno.EIO, f"write failed, is the disk full? ({first})", str(path)) from None


def os_error_behind(err: BaseException) -> OSError | None:
    """The ``OSError`` (with an errno) that ``err`` was raised while handling, if any: ``torch.save``
    into a file object turns the file's ``ENOSPC`` into a ``RuntimeError`` of its own internal text
    ("unexpected pos ...", "PytorchStreamWriter failed writing file ..."), the ``OSError`` its context."""
    link = err
    for _ in range(8):  # a chain is a few links long; never follow a cycle
        behind = link.__cause__ or link.__context__
        if behind is None:
            return None
        if isinstance(behind, OSError) and behind.errno:
            return behind
        link = behind
    return None


LINK_REFUSED = "is a link; fedgc does not write through links (remove it, or use another folder)"
_OPEN_FLAGS = {"w": os.O_WRONLY | os.O_CREAT, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
               "w+": os.O_RDWR | os.O_CREAT}


def open_no_follow(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Any:  # open()'s object for mode
    """``open(path, mode)`` (``w``, ``a``, ``w+``, each also binary) of a file fedgc writes, never
    through a link: a symbolic link at ``path`` (``O_NOFOLLOW``), a file with a second hard link, or
    anything but a regular file (a FIFO, a device) is refused with an ``OSError`` naming ``path``,
    before a byte of it changes (it is truncated for ``w`` only once it is known to be the folder's own)."""
    base = mode.replace("b", "")
    if base not in _OPEN_FLAGS:
        raise ValueError(f"open_no_follow: mode {mode!r} is not w, a or w+")
    flags = _OPEN_FLAGS[base] | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, LINK_REFUSED, str(path)) from None
        if err.errno == errno.ENXIO:  # a FIFO nobody reads
            raise OSError(errno.ENXIO, "not a regular file (a FIFO, socket or device is not written)",
                          str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device is not written)", str(path))
        if info.st_nlink != 1:
            raise OSError(errno.EMLINK, "has another hard link; fedgc does not write through links", str(path))
        os.set_blocking(fd, True)
        if base != "a":
            os.ftruncate(fd, 0)
        return os.fdopen(fd, mode, encoding=None if "b" in mode else encoding)
    except BaseException:
        os.close(fd)
        raise


def replace_no_follow(tmp: str | Path, path: str | Path) -> None:
    """``os.replace(tmp, path)``, refused (``tmp`` removed) where ``path`` is a symbolic link: a file of
    a run folder replaced by a link is not silently dropped, and what the link points to is untouched."""
    if os.path.islink(path):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OSError(errno.ELOOP, LINK_REFUSED, str(path))
    os.replace(tmp, path)


def write_whole(path: str | Path, text: str) -> None:
    """``text`` into ``path`` whole or not at all (``PATH.tmp``, then renamed), never through a link."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open_no_follow(tmp, "w") as f:
        f.write(text)
    replace_no_follow(tmp, path)
