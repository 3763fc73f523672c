"""``python -m fedgc report RUN_DIR [RUN_DIR ...] [--out DIR] [--format md|csv|json]``

Compares finished runs side by side. Reads only the run folders (``summary.json``, ``metrics.jsonl``,
``scenario.yaml``); prints the table (markdown by default) and, with ``--out``, writes it there as
``report.<md|csv|json>`` with overlay plots (accuracy vs simulated time, vs uploaded bytes). Runs that
differ only by ``seed`` are one row (mean ± sample std, n) and one line with a ±std band; two runs of
the same scenario and seed are refused (they would count one result twice) unless
``--allow-duplicate-seeds``; a sweep folder stands for the run folders inside it.
Exit codes: 0 success; 2 a run folder is missing or invalid, or two runs repeat a seed (one line on
stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information (types-PyYAML not installed)

from fedgc.bounded import read_text, write_whole
from fedgc.errors import RunFolderError
from fedgc.reports.table import (
    GroupRow,
    ReportRow,
    RunResult,
    duplicate_seeds,
    group_row,
    group_runs,
    render,
    report_row,
)
from fedgc.runs.engines import EXIT_INVALID
from fedgc.runs.metrics import RUN_FILE_MAX_BYTES, MetricsFileError, Summary, parse_record, read_rounds
from fedgc.scenario import yaml12

__all__ = ["GroupRow", "ReportRow", "RunFolderError", "RunResult", "main", "read_run", "read_runs", "render",
           "report_row", "report_rows", "run_folders", "to_markdown", "write_report"]

FORMATS = ("md", "csv", "json")


# --- reading run folders ---------------------------------------------------------------------------


def _read_text(path: Path, run_dir: Path) -> str:
    if not path.is_file():
        raise RunFolderError(f"{run_dir}: not a run folder (no {path.name})")
    try:
        return read_text(path, "run file", RUN_FILE_MAX_BYTES)
    except ValueError as err:
        raise RunFolderError(str(err).removeprefix("run file ")) from None


def read_run(run_dir: Path, label: str | None = None) -> RunResult:
    """Read one run folder; ``RunFolderError`` (one line) if it is missing or invalid."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RunFolderError(f"{run_dir}: no such run folder")
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir}: not a folder")
    summary_path, metrics_path, scenario_path = (run_dir / n for n in ("summary.json", "metrics.jsonl", "scenario.yaml"))
    try:
        summary = parse_record(Summary, _read_text(summary_path, run_dir), str(summary_path))
        _read_text(metrics_path, run_dir)  # a missing file: "not a run folder"
        rows = read_rounds(metrics_path)
    except MetricsFileError as err:
        raise RunFolderError(str(err)) from None
    try:
        scenario = yaml12.safe_load(_read_text(scenario_path, run_dir))
    except yaml.YAMLError:
        raise RunFolderError(f"{scenario_path}: invalid YAML") from None
    if not isinstance(scenario, dict):
        raise RunFolderError(f"{scenario_path}: expected a mapping of scenario keys")
    compression = scenario.get("compression")
    compressor = str(compression.get("name", "-")) if isinstance(compression, dict) else "-"
    return RunResult(label or run_dir.name, run_dir, summary, rows, compressor, scenario)


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


def run_folders(paths: list[str | Path]) -> list[Path]:
    """The paths, a sweep folder (no ``summary.json`` of its own, run folders inside) replaced by the
    run folders inside it, in name order."""
    folders = []
    for path in map(Path, paths):
        inside = sorted(p for p in path.iterdir() if (p / "summary.json").is_file()) \
            if path.is_dir() and not (path / "summary.json").exists() else []
        folders += inside or [path]
    return folders


def read_runs(run_dirs: list[str | Path]) -> list[RunResult]:
    """Read run folders (a sweep folder stands for the runs inside it)."""
    paths = run_folders(run_dirs)
    seen: set[Path] = set()
    for path in paths:
        if path.resolve() in seen:
            raise RunFolderError(f"{path}: given twice")
        seen.add(path.resolve())
    return [read_run(path, label) for path, label in zip(paths, unique_labels(paths))]


# --- the report ------------------------------------------------------------------------------------

def write_report(runs: list[RunResult], out_dir: Path, fmt: str = "md") -> Path:
    """``out_dir/report.<fmt>`` and the overlay plots; returns the report's path."""
    from fedgc.reports.plots import COMPARE_PLOT_FILES, accuracy_points, plot_comparison
    from fedgc.reports.plots.overlays import mean_series

    out_dir.mkdir(parents=True, exist_ok=True)
    groups = group_runs(runs)
    rows = report_rows(groups)
    plot_comparison([mean_series(row.row.run, [accuracy_points(r.rows) for r in group],
                                 group[0].summary.target_accuracy) for row, group in zip(rows, groups)], out_dir)
    path = out_dir / f"report.{fmt}"
    write_whole(path, render(rows, fmt, COMPARE_PLOT_FILES))
    return path


def to_markdown(rows: list[ReportRow | GroupRow], plot_files: tuple[str, ...] = ()) -> str:
    """The markdown table of ``rows`` (single runs or seed groups), as ``fedgc report`` prints it."""
    return render(rows, "md", plot_files)


def report_rows(groups: list[list[RunResult]]) -> list[GroupRow]:
    """One row per group of runs that differ only by seed (``group_runs``)."""
    return [group_row(group) for group in groups]


# --- command line ----------------------------------------------------------------------------------

class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_INVALID)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="fedgc report", description="Compare finished runs side by side: one row per run, or per group of "
        "runs that differ only by seed (mean ± sample std, n); docs/metrics.md.")
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR",
                        help="run folders written by fedgc.cli.run, or sweep folders holding them")
    parser.add_argument("--out", help="write report.<format> and the overlay plots into this folder")
    parser.add_argument("--format", choices=FORMATS, default="md", help="md (default), csv or json")
    parser.add_argument("--allow-duplicate-seeds", action="store_true",
                        help="average runs of the same scenario and seed anyway (a warning on stderr)")
    args = parser.parse_args(argv)
    try:
        runs = read_runs(args.runs)
        groups = group_runs(runs)
        for line in duplicate_seeds(groups):
            if not args.allow_duplicate_seeds:
                raise RunFolderError(f"{line}: averaging them would count one result twice (n would be too "
                                     "large); give one of them, or add --allow-duplicate-seeds")
            print(f"warning: {line}; averaged as separate runs (--allow-duplicate-seeds)", file=sys.stderr)
        text = render(report_rows(groups), args.format)
        if args.out:
            write_report(runs, Path(args.out), args.format)
    except (RunFolderError, OSError) as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return EXIT_INVALID
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
