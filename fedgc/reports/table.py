"""The comparison table of ``fedgc.reports.run_reports``: one row per run, or per group of runs that differ only by
``seed`` (mean ± sample standard deviation over the n runs of the group; see docs/metrics.md).
Numbers are shown to three significant figures (a std to the mean's last decimal place); in csv and
json, integer counts and byte totals stay integers."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from fedgc.runs.metrics import RoundRecord, Summary

if TYPE_CHECKING:
    from typing import Protocol

    class _Format(Protocol):
        """How a numeric column shows a value (``_number``, ``_pct``, ``_count``, ``_ratio``)."""

        def __call__(self, value: float | None, decimals: int | None = None) -> str: ...


@dataclass(frozen=True)
class RunResult:
    """One run folder, read back."""

    label: str
    path: Path
    summary: Summary
    rows: list[RoundRecord]
    compressor: str
    scenario: dict[str, Any] = field(default_factory=dict)  # scenario.yaml as read


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
    discarded: int
    failed: int
    rejected: int
    stopped_reason: str


TEXT_FIELDS = ("run", "path", "name", "compressor", "stopped_reason")
NUMERIC_FIELDS = tuple(f.name for f in fields(ReportRow) if f.name not in TEXT_FIELDS)


def report_row(run: RunResult) -> ReportRow:
    s = run.summary
    densities = [r.achieved_density for r in run.rows if r.achieved_density is not None]
    return ReportRow(
        run=run.label, path=str(run.path), name=s.name, compressor=run.compressor, rounds=s.rounds,
        final_accuracy=s.final_accuracy, best_accuracy=s.best_accuracy, target_accuracy=s.target_accuracy,
        time_to_target_s=s.time_to_target_s, rounds_to_target=s.rounds_to_target, sim_time_s=s.sim_time_s,
        bytes_up=s.bytes_up, bytes_down=s.bytes_down, mb_up=s.bytes_up / 1e6, mb_down=s.bytes_down / 1e6,
        mean_achieved_density=sum(densities) / len(densities) if densities else None,
        compression_ratio_up=s.compression_ratio_up, dropouts=s.clients_dropped,
        discarded=s.clients_discarded, failed=s.clients_failed,
        rejected=s.updates_rejected, stopped_reason=s.stopped_reason)


# --- groups of seeds -------------------------------------------------------------------------------

def _without_seed(scenario: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in scenario.items() if k != "seed"}, sort_keys=True, default=str)


def group_runs(runs: list[RunResult]) -> list[list[RunResult]]:
    """Runs whose ``scenario.yaml`` is the same once ``seed`` is removed, in order of first appearance."""
    groups: dict[str, list[RunResult]] = {}
    for run in runs:
        groups.setdefault(_without_seed(run.scenario), []).append(run)
    return list(groups.values())


def _group_label(runs: list[RunResult]) -> str:
    stripped = {",".join(p for p in r.label.split(",") if not re.fullmatch(r"seed=[^,/]*", p)) for r in runs}
    label = stripped.pop() if len(stripped) == 1 else ""
    return label or runs[0].summary.name


@dataclass(frozen=True)
class Stat:
    mean: float | None
    std: float | None
    count: int  # runs with a value (time to target: those that reached it)


@dataclass(frozen=True)
class GroupRow:
    """A group of n ≥ 1 runs: ``row`` holds the text fields (and, for n = 1, the run's own values)."""

    row: ReportRow
    n: int
    seeds: tuple[Any, ...]
    stats: dict[str, Stat]


def _stat(values: list[float | None]) -> Stat:
    """Mean and sample standard deviation (n - 1; None for a single value) of the finite values."""
    present = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not present:
        return Stat(None, None, 0)
    mean = sum(present) / len(present)
    if len(present) == 1:
        return Stat(mean, None, 1)
    return Stat(mean, math.sqrt(sum((v - mean) ** 2 for v in present) / (len(present) - 1)), len(present))


def duplicate_seeds(groups: list[list[RunResult]]) -> list[str]:
    """One line per group holding two runs of the same seed (the same scenario run twice: averaging
    them would count one result twice), naming the runs."""
    lines = []
    for group in groups:
        by_seed: dict[str, list[str]] = {}
        for run in group:
            by_seed.setdefault(json.dumps(run.scenario.get("seed")), []).append(run.label)
        lines += [f"{' and '.join(labels)} are the same scenario with the same seed {seed}"
                  for seed, labels in by_seed.items() if len(labels) > 1]
    return lines


def group_row(runs: list[RunResult]) -> GroupRow:
    rows = [report_row(r) for r in runs]
    stats = {name: _stat([getattr(row, name) for row in rows]) for name in NUMERIC_FIELDS}
    seeds = tuple(r.scenario.get("seed") for r in runs)
    if len(rows) == 1:
        return GroupRow(rows[0], 1, seeds, stats)
    reasons = sorted({row.stopped_reason for row in rows})
    first = rows[0]
    text: dict[str, Any] = {"run": _group_label(runs), "path": ";".join(row.path for row in rows), "name": first.name,
                            "compressor": first.compressor, "stopped_reason": ",".join(reasons)}
    # cast: the numeric fields take a group's means (floats, or None), whatever their declared types
    return GroupRow(ReportRow(**text, **cast(dict[str, Any], {name: stats[name].mean for name in NUMERIC_FIELDS})),
                    len(rows), seeds, stats)


# --- rendering -------------------------------------------------------------------------------------

def _decimals(value: float, figures: int = 3) -> int:
    """Decimal places that show ``value`` to ``figures`` significant figures (none at or above 10^figures)."""
    value = float(f"{value:.{figures}g}") if math.isfinite(value) else value  # 0.99999 is 1.00, not 1.000
    if value == 0 or not math.isfinite(value):
        return 0
    return max(0, figures - 1 - math.floor(math.log10(abs(value))))


def _number(value: float | None, decimals: int | None = None) -> str:
    """Three significant figures (``0.420``, ``3.10``, ``17.3``, ``1,052``), or ``decimals`` places."""
    if value is None:
        return "—"
    places = _decimals(value) if decimals is None else decimals
    if places > 6:
        return f"{value:.2e}"
    return f"{value:,.{places}f}"


def _pct(value: float | None, decimals: int | None = None) -> str:
    return "—" if value is None else f"{value * 100:.{1 if decimals is None else decimals}f}%"


def _count(value: float | None, decimals: int | None = None) -> str:
    whole = value is not None and float(value).is_integer() and decimals is None
    return "—" if value is None else f"{int(value):,}" if whole else _number(value, decimals)


def _ratio(value: float | None, decimals: int | None = None) -> str:
    return "—" if value is None else _number(value, decimals) + "×"


def _places(fmt: _Format, value: float) -> int:
    """The decimal places ``fmt`` shows ``value`` with (for the ± of a mean)."""
    if fmt is _pct:
        return 1
    if fmt is _count and float(value).is_integer():
        return 0
    return min(_decimals(value), 6)


NUMERIC_COLUMNS = (  # (markdown header, field, format of a value)
    ("rounds", "rounds", _count),
    ("final acc", "final_accuracy", _pct),
    ("best acc", "best_accuracy", _pct),
    ("target", "target_accuracy", _pct),
    ("time to target (s)", "time_to_target_s", _number),
    ("rounds to target", "rounds_to_target", _count),
    ("sim time (s)", "sim_time_s", _number),
    ("MB up", "mb_up", _number),
    ("MB down", "mb_down", _number),
    ("density", "mean_achieved_density", _number),
    ("compression ratio", "compression_ratio_up", _ratio),
    ("dropouts", "dropouts", _count),
    ("discarded", "discarded", _count),
    ("failed", "failed", _count),
    ("rejected", "rejected", _count),
)

TABLE_NOTE = ("Accuracy: final and best test accuracy. Time to target: simulated seconds until the first round "
              "at or above the target (— never reached). Density: mean achieved density of the applied updates. "
              "Compression ratio: dense fp32 upload bytes / actual upload bytes. Dropouts: clients cut or late. "
              "Discarded: clients still running when the first K updates were in (over-selection), not dropouts.")

GROUP_NOTE = ("Rows with n > 1 group runs that differ only by seed: mean ± sample standard deviation (n - 1 "
              "in the denominator) over the n runs (no ± when they all agree); (k/n): only k of the runs have a "
              "value (e.g. reached the target), the mean and std are over those k.")


def _cell(group: GroupRow, name: str, fmt: _Format) -> str:
    if group.n == 1:
        return fmt(getattr(group.row, name))
    stat = group.stats[name]
    if stat.mean is None:
        return "—"
    if not stat.std:  # one value, or all equal
        text = fmt(stat.mean)
    else:  # the std to the mean's last shown decimal place
        places = _places(fmt, stat.mean)
        text = f"{fmt(stat.mean, places)} ± {fmt(stat.std, places)}"
    return text if stat.count == group.n else f"{text} ({stat.count}/{group.n})"


def to_markdown(groups: list[GroupRow], plot_files: tuple[str, ...] = ()) -> str:
    grouped = any(g.n > 1 for g in groups)
    headers = ["run", "compressor"] + (["n"] if grouped else []) + [h for h, _, _ in NUMERIC_COLUMNS]
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|"]
    for g in groups:
        cells = [g.row.run + (" †" if g.row.stopped_reason != "completed" else ""), g.row.compressor]
        cells += [str(g.n)] if grouped else []
        cells += [_cell(g, name, fmt) for _, name, fmt in NUMERIC_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    notes = ["", TABLE_NOTE] + ([GROUP_NOTE] if grouped else [])
    notes += [f"† {g.row.run}: stopped early ({g.row.stopped_reason})."
              for g in groups if g.row.stopped_reason != "completed"]
    notes += [f"\n![{name}]({name})" for name in plot_files]
    return "\n".join(lines + notes) + "\n"


INTEGER_FIELDS = tuple(f.name for f in fields(ReportRow) if f.type in ("int", "int | None"))


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _typed(name: str, value: Any) -> Any:
    """An integer field (counts, bytes, rounds) as an int when its value (a group's mean) is whole; a
    group's mean of bytes rounded to whole bytes."""
    value = _finite(value)
    if name in INTEGER_FIELDS and isinstance(value, float) and (value.is_integer() or name.startswith("bytes_")):
        return round(value)
    return value


def _record(group: GroupRow, grouped: bool) -> dict[str, Any]:
    """The row's fields; when any group has n > 1 also ``n``, ``seeds`` and ``<field>_std``,
    ``<field>_n`` for every numeric field (the field itself then holds the mean)."""
    record = {k: _typed(k, v) for k, v in asdict(group.row).items()}
    if grouped:
        record["n"], record["seeds"] = group.n, list(group.seeds)
        for name in NUMERIC_FIELDS:
            stat = group.stats[name]
            record[f"{name}_std"], record[f"{name}_n"] = _finite(stat.std), stat.count
    return record


def to_csv(groups: list[GroupRow]) -> str:
    grouped = any(g.n > 1 for g in groups)
    records = [_record(g, grouped) for g in groups]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(list(records[0]) if records else [f.name for f in fields(ReportRow)])
    for record in records:
        writer.writerow(["" if v is None else ";".join(map(str, v)) if isinstance(v, list) else v
                         for v in record.values()])
    return out.getvalue()


def to_json(groups: list[GroupRow]) -> str:
    grouped = any(g.n > 1 for g in groups)
    return json.dumps([_record(g, grouped) for g in groups], indent=2) + "\n"


def render(rows: Sequence[ReportRow | GroupRow], fmt: str, plot_files: tuple[str, ...] = ()) -> str:
    groups = [r if isinstance(r, GroupRow) else GroupRow(r, 1, (), {}) for r in rows]
    return to_markdown(groups, plot_files) if fmt == "md" else to_csv(groups) if fmt == "csv" else to_json(groups)
