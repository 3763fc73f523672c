"""Resumable run state: everything a run needs to continue exactly where it stopped.

A checkpoint is ``{part: part.state_dict()}`` for every stateful part of the run (``PARTS``): the run
itself (rounds done, metrics rows, the global model), the strategy (selection generator,
acknowledgement book), the server optimizer, the network model (links, devices, availability and the
simulated clock), the downlink stage (the server's per-client replicas; None without downlink
compression) and the transport (every client's ``Context.state``: compression memory, pending
updates, downlink replica). Each part owns its state; nothing here reads another object's fields.
It is written to ``checkpoint.pt.tmp``, flushed to disk and renamed over ``checkpoint.pt``: a crash
at any moment leaves either the previous checkpoint or the new one, never a torn file.

Format 4 holds only plain data (``fedgc.core.plain_state``) and is read with
``torch.load(weights_only=True)``: opening a checkpoint never runs code from it. It also holds the
scenario it was written for and its fingerprint (``fedgc.core.resume_check``), so a resume with an
edited scenario is refused unless the change is one that ``RESUMABLE`` allows. The file starts with
a header line ``fedgc-checkpoint 4 <sha256>`` giving the SHA-256 of every byte after it: a checkpoint
changed behind fedgc's back (one flipped byte anywhere) is refused in one line before it is read.
Format 3 (no header, written by earlier versions) is still read, without that check.

Writing it is the one moment a full disk matters most: a failed write (``ENOSPC``, or PyTorch's
``RuntimeError`` for it) is one line naming the file, the partial ``.tmp`` is removed, and the previous
checkpoint stays as it was.

The clients' states come from the transport: the inline grid holds them in this process; on Flower's
runtimes the partition grid asks each node for its ``Context.state`` and hands it back on resume.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import torch

from fedgc.bounded import open_no_follow, os_error_behind, replace_no_follow
from fedgc.core.plain_state import PlainStateError, from_plain, to_plain
from fedgc.errors import FedgcError
from fedgc.runs.folder import CHECKPOINT

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

    from fedgc.scenario.model import Scenario

# 1: pickled objects; 2: one flat record of every part's fields; 3: {part: part.state_dict()};
# 4: 3 behind a header line with the SHA-256 of the rest.
FORMAT_VERSION = 4
READABLE_FORMATS = (3, 4)
MAGIC = b"fedgc-checkpoint 4 "
HEADER_BYTES = len(MAGIC) + 64 + 1  # magic, hex digest, newline
TAIL_BYTES = 256 * 1024  # what last_round_written reads of metrics.jsonl: many of its longest rows


class _Offset(io.RawIOBase):
    """``f`` seen from byte ``start`` on, so ``torch.save``/``torch.load`` see a file of their own."""

    def __init__(self, f: io.BufferedIOBase, start: int) -> None:
        self.f, self.start = f, start
        f.seek(start)

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        return self.f.read(n)

    def readinto(self, buffer: WriteableBuffer) -> int:
        return self.f.readinto(buffer)

    def write(self, data: ReadableBuffer) -> int:
        return self.f.write(data)

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.f.seek(self.start + pos if whence == 0 else pos, whence) - self.start

    def tell(self) -> int:
        return self.f.tell() - self.start

    def flush(self) -> None:
        self.f.flush()


def _digest_from(f: io.BufferedIOBase, start: int) -> str:
    f.seek(start)
    h = hashlib.sha256()
    while chunk := f.read(1 << 20):
        h.update(chunk)
    return h.hexdigest()
PARTS = ("run", "strategy", "optimizer", "network", "downlink", "transport")


class CheckpointError(FedgcError, ValueError):
    """A run folder cannot be resumed; ``str(err)`` is one line."""


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk); ``str(err)`` is one line naming the file."""


class StateFileError(ValueError):
    """A part whose state lives in a file of its own (the disk client-state store) refuses that file on
    resume; ``str(err)`` is one line naming it, passed on as it is (the fault is that file's, not the
    checkpoint's)."""


def run_state(rounds_done: int, metrics_rows: int, weights: dict[str, torch.Tensor]) -> dict[str, object]:
    """The run's own part: rounds completed, rows of metrics.jsonl up to the checkpoint (a retried
    round has a row per attempt) and the global model then."""
    return {"round": rounds_done, "metrics_rows": metrics_rows, "weights": dict(weights)}


def save(run_dir: Path, state: dict[str, dict[str, Any] | None], scenario: dict[str, object]) -> Path:
    """``state``: ``{part: state_dict}`` for every name in ``PARTS``; ``scenario``:
    ``resume_check.scenario_record(...)`` of the run's scenario."""
    payload = {"format": FORMAT_VERSION, "scenario": scenario, "state": to_plain(state)}
    return write_file(run_dir / CHECKPOINT, payload)


def write_file(path: Path, payload: dict[str, object]) -> Path:
    """``payload`` into ``path`` behind its digest header: written to ``path.tmp``, flushed and renamed
    over ``path``; a failed write is one line and leaves ``path`` as it was."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open_no_follow(tmp, "w+b") as f:  # never through a link planted in the run folder
            f.write(MAGIC + b"0" * 64 + b"\n")
            torch.save(payload, cast(IO[bytes], _Offset(f, HEADER_BYTES)))
            f.flush()
            digest = _digest_from(f, HEADER_BYTES)
            f.seek(len(MAGIC))
            f.write(digest.encode())
            f.flush()
            os.fsync(f.fileno())
        replace_no_follow(tmp, path)  # atomic on POSIX: readers see the old file or the new one
    except (OSError, RuntimeError) as err:
        tmp.unlink(missing_ok=True)
        failed = err if isinstance(err, OSError) and err.errno else os_error_behind(err)  # torch's own text hides it
        why = os.strerror(failed.errno) if failed is not None and failed.errno else str(err).splitlines()[0][:120]
        raise CheckpointWriteError(f"{path}: cannot write the checkpoint ({why}); the previous checkpoint, if any, "
                                   "is kept") from None
    return path


class DigestMismatch(ValueError):
    """The file's bytes do not match its header's SHA-256."""


def read_file(path: Path, *, weights_only: bool = True) -> tuple[object, bool]:
    """(the payload, whether it had a digest header); ``DigestMismatch`` when the bytes were changed."""
    with path.open("rb") as f:
        header = f.read(HEADER_BYTES)
        if not header.startswith(MAGIC):
            f.seek(0)
            return torch.load(f, weights_only=weights_only), False
        saved = header[len(MAGIC):-1].decode(errors="replace")
        if len(header) != HEADER_BYTES or header[-1:] != b"\n" or _digest_from(f, HEADER_BYTES) != saved:
            raise DigestMismatch(str(path))
        return torch.load(cast(IO[bytes], _Offset(f, HEADER_BYTES)), weights_only=weights_only), True


def load(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checkpoint's ``{part: state}`` and the scenario record it was written for. Read with
    ``weights_only=True``: a file holding anything but plain data is refused, and nothing in it runs."""
    path = run_dir / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(f"--resume {run_dir}: no {CHECKPOINT} in that folder (checkpoint_every=0, "
                              "or the run stopped before its first checkpoint)")
    try:
        payload, has_digest = read_file(path)
    except DigestMismatch:
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} was changed after it was written (its SHA-256 "
                              "does not match its header): refused unread") from None
    except Exception as err:  # noqa: BLE001 — any unreadable file gets a one-line answer
        if "weights only load failed" in str(err).lower():
            raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} is not a plain-data checkpoint (refused "
                                  "unread: it is damaged, or holds objects whose loading could run code)") from None
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} is unreadable ({type(err).__name__})") from None
    version = payload.get("format") if isinstance(payload, dict) else None
    if not isinstance(payload, dict) or version not in READABLE_FORMATS or (version == FORMAT_VERSION) != has_digest:
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} has format {version!r}, this fedgc reads "
                              f"formats {' and '.join(map(str, READABLE_FORMATS))} only (start the run again)")
    try:
        state = from_plain(payload["state"])
        scenario = payload["scenario"]
        if not isinstance(scenario, dict) or not isinstance(state, dict) or set(state) != set(PARTS):
            raise TypeError
        run = state["run"]
        if not all(type(run[k]) is int and run[k] >= 0 for k in ("round", "metrics_rows")):
            raise TypeError
    except PlainStateError as err:
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT}: {err}") from None
    except (KeyError, TypeError):
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} is malformed") from None
    return state, scenario


def resumable(run_dir: Path, scenario: Scenario) -> dict[str, Any]:
    """The checkpoint's state, once it is known to belong to ``scenario`` (else one-line ``CheckpointError``)."""
    from fedgc.core.resume_check import refusal

    state, saved_scenario = load(run_dir)
    refused = refusal(saved_scenario, scenario, state["run"]["round"], last_round_written(run_dir))
    if refused is None and state["run"]["round"] > scenario.rounds:
        refused = f"its round {state['run']['round']} is past the scenario's {scenario.rounds} rounds"
    if refused is not None:
        raise CheckpointError(f"--resume {run_dir}: {refused}")
    return state


def last_round_written(run_dir: Path) -> int | None:
    """The ``round`` of the last row of ``run_dir``'s ``metrics.jsonl`` (rows the run wrote, a stopped
    run's rows past its checkpoint included; a torn last row, with no newline, is not counted), 0 for no
    file or no row; None when the file's last row cannot be read (a resume then may not lower ``rounds``).
    Reads at most the file's last 256 KiB."""
    path = run_dir / "metrics.jsonl"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))  # a FIFO does not block
    except FileNotFoundError:
        return 0
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - TAIL_BYTES))
        tail = f.read(TAIL_BYTES)
    if not tail.endswith(b"\n"):
        tail = tail[:tail.rfind(b"\n") + 1]  # a row torn by a kill was never written whole: not counted
    lines = [line for line in tail.splitlines() if line.strip()]
    if not lines:
        return 0 if size == 0 or size <= TAIL_BYTES else None
    try:
        last = json.loads(lines[-1])
    except ValueError:
        return None
    value = last.get("round") if isinstance(last, dict) else None
    return value if type(value) is int and value >= 0 else None


def model_mismatch(weights: object, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """How a checkpoint's weights fail to fit the model (``shapes``), or None when they fit."""
    if not isinstance(weights, dict) or not all(isinstance(w, torch.Tensor) for w in weights.values()):
        return "its model weights are not tensors"
    missing, extra = sorted(set(shapes) - set(weights)), sorted(set(weights) - set(shapes))
    if missing or extra:
        return f"its model has {'no ' + missing[0] if missing else 'an unknown ' + extra[0]}"
    for name, shape in shapes.items():
        if tuple(weights[name].shape) != tuple(shape):
            return f"its {name} has shape {tuple(weights[name].shape)}, the model's has {tuple(shape)}"
    return None


def _buffers_fit(buffers: object, shapes: dict[str, tuple[int, ...]]) -> bool:
    """Server optimizer buffers are named ``<slot>/<parameter>`` and shaped like their parameter."""
    return isinstance(buffers, dict) and all(
        isinstance(b, torch.Tensor) and k.partition("/")[2] in shapes
        and tuple(b.shape) == tuple(shapes[k.partition("/")[2]]) for k, b in buffers.items())


def restore(state: dict[str, Any], parts: dict[str, Any], shapes: dict[str, tuple[int, ...]]) -> None:
    """Load every part's state into a freshly built run (``parts``: ``{name: object with
    load_state_dict}``, None for a part the run does not have); one ``CheckpointError`` line if it
    does not fit."""
    mismatch = model_mismatch(state["run"].get("weights"), shapes)
    if mismatch is None and not _buffers_fit((state["optimizer"] or {}).get("buffers"), shapes):
        mismatch = "its server optimizer buffers do not fit the model"
    if mismatch is not None:
        raise CheckpointError(f"{CHECKPOINT} does not fit this scenario's model: {mismatch}")
    for name, part in parts.items():
        if (state[name] is None) != (part is None):
            raise CheckpointError(f"{CHECKPOINT} and the scenario disagree on the {name} part")
        if part is None:
            continue
        # A part that can tell how its saved state fails the model (the transport: the clients' memories)
        # is asked first: a resume refuses it here rather than the run failing a client every round.
        fits = getattr(part, "state_mismatch", None)
        mismatch = fits(state[name], shapes) if callable(fits) else None
        if mismatch is not None:
            raise CheckpointError(f"{CHECKPOINT} does not fit this scenario's model: {mismatch}")
        try:
            part.load_state_dict(state[name])
        except StateFileError as err:
            raise CheckpointError(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
        except Exception as err:  # noqa: BLE001 — a state that does not fit (a garbage RNG state...) is one line
            why = (str(err).splitlines()[0] if isinstance(err, ValueError) and str(err)
                   else "its saved state does not fit this run")
            raise CheckpointError(f"{CHECKPOINT} is malformed ({name}: {why})") from None
