"""``python -m fedgc.report RUN_DIR [RUN_DIR ...] [--out DIR] [--format md|csv|json]``

Compares finished runs side by side. Reads only the run folders (``summary.json``, ``metrics.jsonl``,
``scenario.yaml``); prints the table (markdown by default) and, with ``--out``, writes it there as
``report.<md|csv|json>`` with overlay plots (accuracy vs simulated time, vs uploaded bytes).
Exit codes: 0 success; 2 a run folder is missing or invalid (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
import types
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import yaml

from fedgc.metrics import RoundRecord, Summary

EXIT_INVALID = 2
FORMATS = ("md", "csv", "json")


class RunFolderError(ValueError):
    """A run folder cannot be read; ``str(err)`` is one line naming the folder or file and the problem."""


@dataclass(frozen=True)
class RunResult:
    """One run folder, read back."""

    label: str
    path: Path
    summary: Summary
    rows: list[RoundRecord]
    compressor: str


@dataclass(frozen=True)
class ReportRow:
    """One line of the comparison; raw units (accuracy 0–1, seconds, bytes) for csv and json."""

    run: str
    path: str
    name: str
    compressor: str
    rounds: int
    final_accuracy: float | None
    best_accuracy: float | None
    target_accuracy: float
    time_to_target_s: float | None
    rounds_to_target: int | None
    sim_time_s: float
    bytes_up: int
    bytes_down: int
    mb_up: float
    mb_down: float
    mean_achieved_density: float | None
    compression_ratio_up: float | None
    dropouts: int
    failed: int
    rejected: int
    stopped_reason: str


# --- reading run folders ---------------------------------------------------------------------------

def _fits(value: Any, hint: Any) -> bool:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, arg) for arg in get_args(hint))
    if hint is type(None):
        return value is None
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, (int, float))
    if origin is list:
        return isinstance(value, list) and all(_fits(v, get_args(hint)[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    return isinstance(value, hint)


def _typed(cls, data: Any, where: str):
    """``cls(**data)`` for a dataclass, checking that every key is there (or has a default) with the
    declared type; keys the dataclass does not know are ignored (newer or older fedgc versions)."""
    if not isinstance(data, dict):
        raise RunFolderError(f"{where}: expected a JSON object")
    hints, values = get_type_hints(cls), {}
    for f in fields(cls):
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise RunFolderError(f"{where}: missing key {f.name!r}")
            continue
        if not _fits(data[f.name], hints[f.name]):
            raise RunFolderError(f"{where}: key {f.name!r} has the wrong type ({type(data[f.name]).__name__})")
        values[f.name] = data[f.name]
    return cls(**values)


def _read_text(path: Path, run_dir: Path) -> str:
    if not path.is_file():
        raise RunFolderError(f"{run_dir}: not a run folder (no {path.name})")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise RunFolderError(f"{path}: cannot read ({err.__class__.__name__})") from None


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise RunFolderError(f"{where}: invalid JSON ({err.msg} at line {err.lineno})") from None


def read_run(run_dir: Path, label: str | None = None) -> RunResult:
    """Read one run folder; ``RunFolderError`` (one line) if it is missing or invalid."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RunFolderError(f"{run_dir}: no such run folder")
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir}: not a folder")
    summary_path, metrics_path, scenario_path = (run_dir / n for n in ("summary.json", "metrics.jsonl", "scenario.yaml"))
    summary = _typed(Summary, _json(_read_text(summary_path, run_dir), str(summary_path)), str(summary_path))
    rows = []
    for number, line in enumerate(_read_text(metrics_path, run_dir).splitlines(), start=1):
        if line.strip():
            where = f"{metrics_path} line {number}"
            rows.append(_typed(RoundRecord, _json(line, where), where))
    try:
        scenario = yaml.safe_load(_read_text(scenario_path, run_dir))
    except yaml.YAMLError:
        raise RunFolderError(f"{scenario_path}: invalid YAML") from None
    if not isinstance(scenario, dict):
        raise RunFolderError(f"{scenario_path}: expected a mapping of scenario keys")
    compression = scenario.get("compression")
    compressor = str(compression.get("name", "-")) if isinstance(compression, dict) else "-"
    return RunResult(label or run_dir.name, run_dir, summary, rows, compressor)


def unique_labels(paths: list[Path]) -> list[str]:
    """Each folder's name, or as many trailing path parts as it takes to tell two folders apart."""
    parts = [p.resolve().parts for p in paths]
    depth = [1] * len(paths)
    while True:
        labels = ["/".join(p[-d:]) for p, d in zip(parts, depth)]
        clashes = {label for label in labels if labels.count(label) > 1}
        if not clashes:
            return labels
        for i, label in enumerate(labels):
            if label in clashes and depth[i] < len(parts[i]):
                depth[i] += 1


def read_runs(run_dirs: list[str | Path]) -> list[RunResult]:
    paths = [Path(p) for p in run_dirs]
    seen: set[Path] = set()
    for path in paths:
        if path.resolve() in seen:
            raise RunFolderError(f"{path}: given twice")
        seen.add(path.resolve())
    return [read_run(path, label) for path, label in zip(paths, unique_labels(paths))]


# --- the table -------------------------------------------------------------------------------------

def report_row(run: RunResult) -> ReportRow:
    s = run.summary
    densities = [r.achieved_density for r in run.rows if r.achieved_density is not None]
    return ReportRow(
        run=run.label, path=str(run.path), name=s.name, compressor=run.compressor, rounds=s.rounds,
        final_accuracy=s.final_accuracy, best_accuracy=s.best_accuracy, target_accuracy=s.target_accuracy,
        time_to_target_s=s.time_to_target_s, rounds_to_target=s.rounds_to_target, sim_time_s=s.sim_time_s,
        bytes_up=s.bytes_up, bytes_down=s.bytes_down, mb_up=s.bytes_up / 1e6, mb_down=s.bytes_down / 1e6,
        mean_achieved_density=sum(densities) / len(densities) if densities else None,
        compression_ratio_up=s.compression_ratio_up, dropouts=s.clients_dropped, failed=s.clients_failed,
        rejected=s.updates_rejected, stopped_reason=s.stopped_reason)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _mb(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


MARKDOWN_COLUMNS = (
    ("run", lambda r: r.run + (" †" if r.stopped_reason != "completed" else "")),
    ("compressor", lambda r: r.compressor),
    ("rounds", lambda r: str(r.rounds)),
    ("final acc", lambda r: _pct(r.final_accuracy)),
    ("best acc", lambda r: _pct(r.best_accuracy)),
    ("target", lambda r: _pct(r.target_accuracy)),
    ("time to target (s)", lambda r: _seconds(r.time_to_target_s)),
    ("rounds to target", lambda r: "—" if r.rounds_to_target is None else str(r.rounds_to_target)),
    ("sim time (s)", lambda r: _seconds(r.sim_time_s)),
    ("MB up", lambda r: _mb(r.mb_up)),
    ("MB down", lambda r: _mb(r.mb_down)),
    ("density", lambda r: "—" if r.mean_achieved_density is None else f"{r.mean_achieved_density:.3g}"),
    ("compression ratio", lambda r: "—" if r.compression_ratio_up is None else f"{r.compression_ratio_up:.1f}×"),
    ("dropouts", lambda r: str(r.dropouts)),
    ("failed", lambda r: str(r.failed)),
    ("rejected", lambda r: str(r.rejected)),
)


TABLE_NOTE = ("Accuracy: final and best test accuracy. Time to target: simulated seconds until the first round "
              "at or above the target (— never reached). Density: mean achieved density of the applied updates. "
              "Compression ratio: dense fp32 upload bytes / actual upload bytes. Dropouts: clients cut or late.")


def to_markdown(rows: list[ReportRow], plot_files: tuple[str, ...] = ()) -> str:
    lines = ["| " + " | ".join(name for name, _ in MARKDOWN_COLUMNS) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(MARKDOWN_COLUMNS))) + "|"]
    lines += ["| " + " | ".join(cell(r) for _, cell in MARKDOWN_COLUMNS) + " |" for r in rows]
    notes = ["", TABLE_NOTE]
    notes += [f"† {r.run}: stopped early ({r.stopped_reason})." for r in rows if r.stopped_reason != "completed"]
    notes += [f"\n![{name}]({name})" for name in plot_files]
    return "\n".join(lines + notes) + "\n"


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def to_csv(rows: list[ReportRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([f.name for f in fields(ReportRow)])
    for row in rows:
        writer.writerow(["" if v is None else v for v in (_finite(v) for v in asdict(row).values())])
    return out.getvalue()


def to_json(rows: list[ReportRow]) -> str:
    return json.dumps([{k: _finite(v) for k, v in asdict(r).items()} for r in rows], indent=2) + "\n"


def render(rows: list[ReportRow], fmt: str, plot_files: tuple[str, ...] = ()) -> str:
    return to_markdown(rows, plot_files) if fmt == "md" else to_csv(rows) if fmt == "csv" else to_json(rows)


def write_report(runs: list[RunResult], out_dir: Path, fmt: str = "md") -> Path:
    """``out_dir/report.<fmt>`` and the overlay plots; returns the report's path."""
    from fedgc.plots import COMPARE_PLOT_FILES, RunSeries, accuracy_points, plot_comparison

    out_dir.mkdir(parents=True, exist_ok=True)
    plot_comparison([RunSeries(r.label, accuracy_points(r.rows), r.summary.target_accuracy) for r in runs], out_dir)
    path = out_dir / f"report.{fmt}"
    path.write_text(render([report_row(r) for r in runs], fmt, COMPARE_PLOT_FILES), encoding="utf-8")
    return path


# --- command line ----------------------------------------------------------------------------------

class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_INVALID)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m fedgc.report", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders written by fedgc.simulate")
    parser.add_argument("--out", help="write report.<format> and the overlay plots into this folder")
    parser.add_argument("--format", choices=FORMATS, default="md", help="md (default), csv or json")
    args = parser.parse_args(argv)
    try:
        runs = read_runs(args.runs)
        text = render([report_row(r) for r in runs], args.format)
        if args.out:
            write_report(runs, Path(args.out), args.format)
    except (RunFolderError, OSError) as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return EXIT_INVALID
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
