"""What compression bought: a scenario run beside its baselines, as a short human table.

``fedgc run SCENARIO --baseline`` (and ``make run``) runs three variants of one scenario, each a
normal run folder under the comparison folder:

* ``dense``: no compression either way (FedAvg's uploads and downloads);
* the scenario as written (e.g. ``dgc up``);
* the scenario with both directions compressed: its uploads, and top-k downloads at density 0.1
  (``DOWNLINK``) — or, when the scenario already compresses downloads, the scenario with dense
  downloads instead, so the comparison still isolates them.

Then it prints the table (method, final accuracy, simulated time and rounds to the target, MB up and
down, the upload compression on the wire, the speed-up over dense in time to target), one sentence
of reading (where the bytes went, which variant reached the target first), and writes both to
``comparison.md``. ``human_summary`` is the one or two lines every run ends with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from fedgc.bounded import write_whole
from fedgc.runs.metrics import Summary
from fedgc.scenario.model import Scenario

DOWNLINK = {"name": "topk", "density": 0.1}  # docs/downlink.md: 8.7 MB -> 1.4 MB of downloads on the quickstart
MB = 1e6


def _mb(n: int) -> str:
    return f"{n / MB:.2f}"


def human_summary(summary: Summary, out_dir: Path | None, command_s: float | None = None) -> str:
    """Two lines with rounded figures and where the outputs are. The wall-clock time is the run's
    (``summary.wall_time_s``: loading the data, building the model and network, the rounds) and, given
    ``command_s``, the whole command's beside it (Python's start, the imports and the plots included)."""
    target = f"{summary.target_accuracy:.0%}"
    if summary.time_to_target_s is not None:
        reached = f"reached {target} after {summary.time_to_target_s:.1f} s simulated (round {summary.rounds_to_target})"
    else:
        reached = f"did not reach {target}"
    ratio = f", {summary.compression_ratio_up:.1f}× smaller than dense" if summary.compression_ratio_up else ""
    first = (f"{summary.name}: {summary.rounds} rounds, final accuracy {summary.final_accuracy:.3f} "
             f"(best {summary.best_accuracy:.3f}); {reached}")
    second = (f"up {_mb(summary.bytes_up)} MB{ratio}; down {_mb(summary.bytes_down)} MB; "
              f"{summary.sim_time_s:.1f} s simulated; wall clock: {summary.wall_time_s:.1f} s the run (data, model, rounds)")
    if command_s is not None:
        second += f", {command_s:.1f} s the whole command"
    if out_dir is not None:
        second += f"; outputs in {out_dir}"
    return f"{first}\n{second}"


@dataclass(frozen=True)
class Variant:
    label: str  # as the table shows it
    folder: str  # its run folder's name inside the comparison folder
    scenario: Scenario


def _with(scenario: Scenario, *, compression: dict[str, Any] | None = None,
          downlink: dict[str, Any] | None = None) -> Scenario:
    from fedgc.scenario.model import validate

    tree = scenario.model_dump(mode="json")
    if compression is not None:
        tree["compression"] = compression
    if downlink is not None:
        tree["downlink"] = downlink
    return validate(tree)


def baseline_variants(scenario: Scenario) -> list[Variant]:
    """Dense, the scenario, and the scenario with the other downlink (see the module docstring)."""
    name = scenario.compression.name
    dense = _with(scenario, compression={"name": "none"}, downlink={"name": "none"})
    variants = [Variant("dense", "dense", dense)]
    if scenario.downlink.enabled:
        variants.append(Variant(f"{name} up only", f"{name}-up", _with(scenario, downlink={"name": "none"})))
        variants.append(Variant(f"{name} up + {scenario.downlink.name} down", f"{name}-up-down", scenario))
    else:
        variants.append(Variant(f"{name} up", f"{name}-up", scenario))
        variants.append(Variant(f"{name} up + {DOWNLINK['name']} down", f"{name}-up-down",
                                _with(scenario, downlink=dict(DOWNLINK))))
    return variants


@dataclass(frozen=True)
class Compared:
    variant: Variant
    summary: Summary
    out_dir: Path | None


def run_comparison(scenario: Scenario, out_dir: Path | None, *, quiet: bool = True,
                   log: Callable[[str], object] | None = None) -> list[Compared]:
    """Each variant into ``out_dir/<folder>`` (a normal run folder; None: no files)."""
    from fedgc.runs.engines import run_scenario
    from fedgc.runs.folder import claim_folder
    from fedgc.scenario.model import dump_scenario

    results = []
    for number, variant in enumerate(baseline_variants(scenario), start=1):
        if log is not None:
            log(f"[{number}/3] {variant.label}")
        folder = out_dir / variant.folder if out_dir is not None else None
        if folder is None:
            summary = run_scenario(variant.scenario, None, quiet=quiet)
        else:
            with claim_folder(folder):
                write_whole(folder / "scenario.yaml", dump_scenario(variant.scenario))
                summary = run_scenario(variant.scenario, folder, quiet=quiet,
                                       title=f"{scenario.name}, {variant.label}")  # its plots say which
        results.append(Compared(variant, summary, folder))
        if summary.stopped_reason != "completed":
            break  # interrupted or diverged: the rest would not be compared like with like
    return results


def columns(target_accuracy: float) -> tuple[str, ...]:
    return ("method", "acc", f"to {target_accuracy:.0%}", "rounds", "MB up", "MB down", "up ×", "speed-up")


def comparison_rows(results: list[Compared]) -> list[tuple[str, ...]]:
    dense = results[0].summary if results and results[0].variant.label == "dense" else None
    rows: list[tuple[str, ...]] = []
    for r in results:
        s = r.summary
        speedup = "-"
        if dense is not None and dense.time_to_target_s and s.time_to_target_s:
            speedup = f"{dense.time_to_target_s / s.time_to_target_s:.2f}×"
        rows.append((r.variant.label, f"{s.final_accuracy:.3f}",
                     f"{s.time_to_target_s:.1f} s" if s.time_to_target_s is not None else "never",
                     str(s.rounds_to_target) if s.rounds_to_target is not None else "-",
                     _mb(s.bytes_up), _mb(s.bytes_down),
                     f"{s.compression_ratio_up:.1f}" if s.compression_ratio_up else "-", speedup))
    return rows


def comparison_table(results: list[Compared]) -> str:
    """A plain-text table that fits 80 columns: final accuracy, simulated time and rounds to the target,
    MB each way, the upload compression on the wire, and how much faster than dense the target was reached."""
    header = columns(results[0].summary.target_accuracy)
    rows = [header, *comparison_rows(results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def reading(results: list[Compared]) -> str:
    """One sentence on where the bytes (and so the time) went, and what reached the target first."""
    if len(results) < 2:
        return "the comparison stopped early: only the runs above finished"
    scenario_run = results[1].summary
    total = scenario_run.bytes_up + scenario_run.bytes_down
    down_share = scenario_run.bytes_down / total if total else 0.0
    reached = [r for r in results if r.summary.time_to_target_s is not None]
    # cast: ``reached`` holds only the runs whose time to target is not None
    best = min(reached, key=lambda r: cast(float, r.summary.time_to_target_s)) if reached else None
    target = f"{results[0].summary.target_accuracy:.0%}"
    first = (f"downloads are {down_share:.0%} of the bytes of {results[1].variant.label}: compress them too"
             if down_share > 0.5 else f"uploads are {1 - down_share:.0%} of the bytes of {results[1].variant.label}")
    if best is None:
        return f"{first}; no variant reached {target}."
    said = f"{first}; {best.variant.label} reached {target} first ({best.summary.time_to_target_s:.1f} s simulated)"
    if best is results[0] and best.variant.label == "dense":
        rounds = [r.summary.rounds_to_target for r in results[1:] if r.summary.rounds_to_target is not None]
        if rounds:
            span = str(min(rounds)) if min(rounds) == max(rounds) else f"{min(rounds)}–{max(rounds)}"
            said += (f": the compressed runs needed more rounds ({span} against "
                     f"{best.summary.rounds_to_target}) than their smaller transfers saved")
    return said + "."


def plot_variants(results: list[Compared], out_dir: Path) -> list[Path]:
    """The overlays of the variants into ``out_dir`` (``BASELINE_PLOT_FILES``: accuracy against
    simulated time and against bytes up + down, one line per variant, labelled as the table names it)."""
    from fedgc.reports.plots import accuracy_points
    from fedgc.reports.plots.overlays import RunSeries, plot_baseline
    from fedgc.runs.metrics import read_rounds

    series = [RunSeries(r.variant.label, accuracy_points(read_rounds(r.out_dir / "metrics.jsonl")),
                        r.summary.target_accuracy) for r in results if r.out_dir is not None]
    return plot_baseline(series, out_dir, results[0].summary.name)


def write_comparison(results: list[Compared], out_dir: Path) -> Path:
    """``comparison.md`` (the table and its reading) and the overlay plots beside it."""
    plots = plot_variants(results, out_dir)
    path = out_dir / "comparison.md"
    table = comparison_table(results)
    write_whole(path, f"# {results[0].summary.name}: compression against its baselines\n\n```\n{table}\n```\n\n"
                f"{reading(results)}\n\nRun folders: " + ", ".join(f"`{r.variant.folder}/`" for r in results)
                + "; overlays: " + ", ".join(f"`{p.name}`" for p in plots) + "\n")
    return path


