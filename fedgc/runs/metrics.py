"""Per-round metrics and the run summary (no Flower imports here). Keys are documented in docs/metrics.md."""

from __future__ import annotations

import contextlib
import gc
import json
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from fedgc.bounded import open_no_follow, read_text, write_whole, writing
from fedgc.errors import FedgcError


@dataclass
class RoundRecord:
    round: int
    sim_start_s: float = 0.0
    sim_end_s: float = 0.0
    round_duration_s: float = 0.0
    selected: int = 0
    completed: int = 0
    cut: int = 0
    late: int = 0
    discarded: int = 0  # still running when the first K updates were in (over-selection), dropped on purpose
    failed: int = 0
    rejected: int = 0
    applied: int = 0
    bytes_down: int = 0
    bytes_up: int = 0
    dense_bytes_up: int = 0
    density: float | None = None
    achieved_density: float | None = None
    train_loss: float | None = None
    accuracy: float | None = None
    loss: float | None = None
    mean_download_s: float | None = None
    mean_compute_s: float | None = None
    mean_upload_s: float | None = None
    max_upload_s: float | None = None
    rejected_reasons: dict[str, int] = field(default_factory=dict)
    applied_nodes: list[int] = field(default_factory=list)  # whose updates the aggregate holds
    skipped: bool = False  # fewer than strategy.min_clients updates: the model did not change
    attempt: int = 0  # 0: the round's first attempt; k: its k-th retry (strategy.too_few: retry)
    downlink_density: float | None = None  # downlink compression: entries sent / model size, over the round's downloads
    downlink_resets: int = 0  # downloads sent dense because the node's replica was not known
    client_upload_bytes: list[int] = field(default_factory=list)
    client_upload_s: list[float] = field(default_factory=list)
    clipped_nodes: list[int] = field(default_factory=list)  # updates the server scaled down (norm bound)
    capped_nodes: list[int] = field(default_factory=list)  # updates whose weight share the server capped
    # client.report_norms: the applied updates' L2 norms before and after the clients' local clipping
    norm_before_clip_median: float | None = None
    norm_before_clip_max: float | None = None
    norm_after_clip_median: float | None = None
    locally_clipped: int | None = None  # how many of them local clipping scaled down


@dataclass
class Summary:
    name: str
    rounds: int
    final_accuracy: float | None
    best_accuracy: float | None
    sim_time_s: float
    wall_time_s: float
    bytes_up: int
    bytes_down: int
    dense_bytes_up: int
    compression_ratio_up: float | None
    target_accuracy: float
    time_to_target_s: float | None
    rounds_to_target: int | None
    clients_completed: int
    clients_dropped: int
    clients_failed: int
    updates_rejected: int
    updates_applied: int
    rounds_skipped: int = 0  # attempts that changed nothing (too few updates), retried or not
    clients_discarded: int = 0  # Σ discarded: over-selection's extra clients, not counted as dropped
    stopped_reason: str = "completed"
    # The CPU kernel sets the run computed with (fedgc.core.kernels.describe; None: not recorded, a run
    # of an older fedgc): runs agree bit for bit only under the same ones (docs/performance.md).
    cpu_kernels: str | None = None


def _clean(value: object) -> object:
    """JSON cannot hold NaN/Inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLog:
    """Appends one JSON object per round to ``metrics.jsonl`` and keeps the rows for the summary."""

    def __init__(self, path: Path | None, rows: list[RoundRecord] | None = None) -> None:
        """A new log; ``rows``: the rounds already done (a resumed run), rewritten as the file's start."""
        self.path = path
        self.rows: list[RoundRecord] = list(rows or [])
        if path is not None:
            with writing(path):
                write_whole(path, "".join(self._line(r) for r in self.rows))

    @staticmethod
    def _line(record: RoundRecord) -> str:
        # the fields in order, as asdict gives them but without its deep copy (a resume rewrites 10^6 rows)
        return json.dumps({name: _clean(getattr(record, name)) for name in _validator(RoundRecord)[1]},
                          sort_keys=False) + "\n"

    def append(self, record: RoundRecord) -> None:
        self.rows.append(record)
        if self.path is not None:
            with writing(self.path), open_no_follow(self.path, "a") as f:
                f.write(self._line(record))

    def summarize(self, name: str, target_accuracy: float, wall_time_s: float,
                  stopped_reason: str = "completed") -> Summary:
        rows = self.rows
        accuracies = [r.accuracy for r in rows if r.accuracy is not None]
        reached = next((r for r in rows if r.accuracy is not None and r.accuracy >= target_accuracy), None)
        bytes_up = sum(r.bytes_up for r in rows)
        dense_up = sum(r.dense_bytes_up for r in rows)
        return Summary(
            name=name,
            rounds=len({r.round for r in rows}),
            final_accuracy=accuracies[-1] if accuracies else None,
            best_accuracy=max(accuracies) if accuracies else None,
            sim_time_s=rows[-1].sim_end_s if rows else 0.0,
            wall_time_s=wall_time_s,
            bytes_up=bytes_up,
            bytes_down=sum(r.bytes_down for r in rows),
            dense_bytes_up=dense_up,
            compression_ratio_up=(dense_up / bytes_up) if bytes_up else None,
            target_accuracy=target_accuracy,
            time_to_target_s=reached.sim_end_s if reached else None,
            rounds_to_target=reached.round if reached else None,
            clients_completed=sum(r.completed for r in rows),
            clients_dropped=sum(r.cut + r.late for r in rows),
            clients_failed=sum(r.failed for r in rows),
            updates_rejected=sum(r.rejected for r in rows),
            updates_applied=sum(r.applied for r in rows),
            rounds_skipped=sum(1 for r in rows if r.skipped),
            clients_discarded=sum(r.discarded for r in rows),
            stopped_reason=stopped_reason,
            cpu_kernels=_cpu_kernels(),
        )


def write_summary(path: Path, summary: Summary) -> None:
    with writing(path):  # never a half-written summary: the whole file or none
        write_whole(path, json.dumps({k: _clean(v) for k, v in asdict(summary).items()}, indent=2) + "\n")


class RoundsLog:
    """A JSON-lines file of per-round rows (each with an int ``round``). ``keep_rounds``: a resumed
    run keeps the lines of the rounds up to its checkpoint and drops the rest (they will happen again)."""

    def __init__(self, path: Path | None, keep_rounds: int | None = None) -> None:
        self.path = path
        self.count = 0
        if path is None:
            return
        kept = []
        if keep_rounds is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a torn last line
                if isinstance(row, dict) and isinstance(row.get("round"), int) and row["round"] <= keep_rounds:
                    kept.append(line + "\n")
        self.count = len(kept)
        with writing(path):
            write_whole(path, "".join(kept))

    def append_rows(self, rows: list[dict[str, Any]]) -> None:
        self.count += len(rows)
        if self.path is not None and rows:
            with writing(self.path), open_no_follow(self.path, "a") as f:
                f.write("".join(json.dumps({k: _clean(v) for k, v in row.items()}) + "\n" for row in rows))


class FailureLog(RoundsLog):
    """``failures.jsonl``: one JSON object per client whose ClientApp raised (round, attempt, node,
    exception type, one-line message)."""

    def append(self, round: int, attempt: int, node: int, error_type: str, message: str) -> None:
        self.append_rows([{"round": round, "attempt": attempt, "node": node, "type": error_type, "message": message}])


OUTCOMES = ("applied", "skipped", "rejected", "failed", "late", "cut", "discarded")


@dataclass
class ClientRecord:
    """One selected client in one attempt of a round: a line of ``clients.jsonl`` (docs/metrics.md)."""

    round: int
    attempt: int
    node: int
    outcome: str  # one of OUTCOMES
    phase: str | None = None  # late / cut: the phase it was in (download, compute, upload)
    reason: str | None = None  # rejected: the reason; failed: the exception type and message
    download_s: float | None = None
    compute_s: float | None = None
    upload_s: float | None = None
    bytes_down: int | None = None
    bytes_up: int | None = None
    clipped: bool = False  # its update was scaled down to the round's norm bound
    capped: bool = False  # its weight share was capped
    norm_before_clip: float | None = None  # client.report_norms: its update's L2 norm before local clipping
    norm_after_clip: float | None = None  # ... and after (the same when nothing was clipped)


def _cpu_kernels() -> str:
    from fedgc.core.kernels import describe

    return describe()


# --- reading them back: the one reader of metrics.jsonl and summary.json ---------------------------

class MetricsFileError(FedgcError, ValueError):
    """A metrics file cannot be read; ``str(err)`` is one line naming the file (and line) and the problem."""


@cache
def _validator(cls: type) -> tuple[TypeAdapter[Any], tuple[str, ...]]:
    """The one validator of a record type and its field names, made on first use and kept (a
    validator costs milliseconds to build: one per line made reading 10^5 rows take minutes)."""
    return TypeAdapter(cls), tuple(f.name for f in fields(cls))


_Record = TypeVar("_Record")  # RoundRecord or Summary


def parse_record(cls: type[_Record], text: str, where: str) -> _Record:
    """``cls`` (RoundRecord or Summary) from one JSON object, types checked strictly (an int is not a
    bool, a float field takes an int); keys ``cls`` does not know are ignored (other fedgc versions)."""
    # mypy takes type[a dataclass] (its instances unhashable) for unhashable; a class object hashes (no
    # cast: a function call per row on the reading path)
    record_type: type = cls
    validator, names = _validator(record_type)
    try:
        validator.validate_json(text, strict=True)
    except ValidationError as err:
        first = err.errors()[0]
        key = first["loc"][0] if first["loc"] else None
        if first["type"] == "json_invalid":
            problem = f"invalid JSON ({first['msg'].removeprefix('Invalid JSON: ')})"
        elif first["type"] == "missing":
            problem = f"missing key {key!r}"
        elif key is None:
            problem = "expected a JSON object"
        else:
            problem = f"key {key!r} has the wrong type ({type(first['input']).__name__})"
        raise MetricsFileError(f"{where}: {problem}") from None
    # The values as written (validation would turn an int 0 into 0.0): a resumed run rewrites its
    # rows, and they must come out byte for byte as they went in.
    raw = json.loads(text)
    return cls(**{name: raw[name] for name in names if name in raw})


RUN_FILE_MAX_BYTES = 1024**3  # metrics.jsonl of a 10^6-round run is about 1 GB


def _text(path: Path) -> str:
    try:
        return read_text(path, "run file", RUN_FILE_MAX_BYTES)
    except ValueError as err:
        raise MetricsFileError(str(err).removeprefix("run file ")) from None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused (and resumed if it was on): reading many rows makes
    millions of container objects, each allocation counting towards collections that scan them all
    (half the reading time at 10^5 rows); rows hold no cycles, so nothing is left for it to find."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_rounds(path: Path, count: int | None = None) -> list[RoundRecord]:
    """The rows of a ``metrics.jsonl``; with ``count``, exactly the first ``count`` (a resumed run
    drops any later, partial rows; fewer is an error)."""
    lines = [(n, line) for n, line in enumerate(_text(path).splitlines(), start=1) if line.strip()]
    with _collector_paused():  # 10^6 rows are millions of objects, none in a cycle: no full scans meanwhile
        rows = [parse_record(RoundRecord, line, f"{path} line {n}") for n, line in lines[:count]]
    if count is not None and len(rows) < count:
        raise MetricsFileError(f"{path} holds {len(rows)} rounds, but the checkpoint is at round {count}")
    return rows


def read_summary(path: Path) -> Summary:
    return parse_record(Summary, _text(path), str(path))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file (``failures.jsonl``, ``clients.jsonl``), unchecked."""
    return [json.loads(line) for line in _text(path).splitlines() if line.strip()]


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """``read_rounds`` as plain dicts (for notebooks, pandas and tests)."""
    return [asdict(row) for row in read_rounds(path)]
