"""``fedgc.sweeps.runner``, ``fedgc.load_sweep``, ``fedgc.reports.run_reports`` and ``fedgc.plot``: several runs side by
side, through the same sweep runner, report table and overlay plots as ``fedgc run --sweep`` and
``fedgc report``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from fedgc.api.runs import Run, as_scenario, load_run, path_argument, runs_in
from fedgc.bounded import write_whole
from fedgc.errors import ChoiceError, expect
from fedgc.reports.table import GroupRow, RunResult, group_runs, render
from fedgc.scenario.model import Scenario


def _result(run: Run, label: str) -> RunResult:
    """A run as the report reads it (its folder's name, or ``label`` for a run kept in memory)."""
    scenario = run.scenario.model_dump(mode="json")
    return RunResult(label, run.out_dir or Path(label), run.summary, run.rounds,
                     str(scenario["compression"]["name"]), scenario)


def _labels(runs: Sequence[Run]) -> list[str]:
    """The runs' names in the table: their folders' (told apart as ``fedgc report`` does); for runs kept
    in memory their ``label`` (a sweep point's ``KEY=VALUE,...``, as its folder would be named), a
    label two runs share numbered ``-1``, ``-2``... ."""
    from fedgc.reports.run_reports import unique_labels

    if all(r.out_dir is not None for r in runs):
        return unique_labels(cast("list[Path]", [r.out_dir for r in runs]))  # every out_dir is a Path (above)
    labels = [r.label or r.scenario.name for r in runs]
    seen: dict[str, int] = {}
    numbered = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        numbered.append(f"{label}-{seen[label]}" if labels.count(label) > 1 else label)
    return numbered


def table(runs: Sequence[Run], fmt: str = "md") -> str:
    """The report table of ``runs``: one row per scenario, runs that differ only by seed averaged
    (mean ± sample std, n shown); ``fmt`` ``md``, ``csv`` or ``json``."""
    if fmt not in ("md", "csv", "json"):
        raise ChoiceError(f"fmt must be md, csv or json, not {str(fmt)[:40]!r}")
    _expect_runs(runs, "table")
    return render(table_rows(runs), fmt)


def _expect_runs(runs: object, call: str) -> None:
    expect(isinstance(runs, Sequence) and not isinstance(runs, str) and all(isinstance(r, Run) for r in runs),
           f"{call}'s runs", runs, "a list of fedgc.Run (fedgc.run, fedgc.load_run)")


def table_rows(runs: Sequence[Run]) -> list[GroupRow]:
    """The rows of ``table``, typed."""
    from fedgc.reports.run_reports import report_rows

    return report_rows(group_runs([_result(r, label) for r, label in zip(runs, _labels(runs))]))


def report(runs: Iterable[Run | str | Path], out: str | Path | None = None, fmt: str = "md") -> str:
    """The table ``fedgc report`` prints for runs or run folders (a sweep folder stands for its runs);
    with ``out``, also writes ``report.<fmt>`` and the overlay plots there, as ``fedgc report --out``."""
    from fedgc.reports.run_reports import run_folders

    expect(isinstance(runs, Iterable) and not isinstance(runs, (str, Path)), "report's runs", runs,
           "a list of runs or run folders (a folder alone goes in a list: [folder])")
    expect(fmt in ("md", "csv", "json"), "fmt", fmt, "md, csv or json")
    if out is not None:
        out = path_argument(out, "out")
    expect(out is None or not Path(out).exists() or Path(out).is_dir(), "out", out, "a folder (this is a file)")
    loaded: list[Run] = []
    for item in runs:
        expect(isinstance(item, (Run, str, Path)), "report's runs", item, "a fedgc.Run or a run folder's path")
        if isinstance(item, Run):
            loaded.append(item)
        else:
            loaded += [load_run(p) for p in run_folders([item])]
    if out is not None:
        plot(loaded, out)
    text = table(loaded, fmt)
    if out is not None:
        write_whole(Path(out, f"report.{fmt}"), text)
    return text


def plot(runs: Sequence[Run], out: str | Path) -> list[Path]:
    """The overlay plots ``fedgc report --out`` draws (accuracy against simulated time and against
    uploaded bytes; seeds averaged with a ±std band) into ``out``; returns the files written."""
    from fedgc.reports.plots import accuracy_points, plot_comparison
    from fedgc.reports.plots.overlays import mean_series

    _expect_runs(runs, "plot")
    expect(isinstance(out, (str, Path)), "out", out, "a folder's path (a new or existing folder, not a file)")
    out = path_argument(out, "out")
    expect(not out.exists() or out.is_dir(), "out", out, "a folder's path (a new or existing folder, not a file)")
    results = [_result(r, label) for r, label in zip(runs, _labels(runs))]
    groups = group_runs(results)
    rows = table_rows(runs)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    return plot_comparison([mean_series(row.row.run, [accuracy_points(r.rows) for r in group],
                                        group[0].summary.target_accuracy) for row, group in zip(rows, groups)],
                           out_dir)


@dataclass
class Sweep:
    """The runs of a sweep: from ``sweep``, in plan order (the last swept key varies fastest); from
    ``load_sweep``, in folder-name order. ``out_dir``: the sweep folder (None: no files were kept)."""

    runs: list[Run]
    out_dir: Path | None = None

    def table(self, fmt: str = "md") -> str:
        """The report table: one row per point, seeds averaged (mean ± sample std, n shown)."""
        return table(self.runs, fmt)

    def to_pandas(self) -> Any:
        """One row per run: its swept values' scenario and summary fields (needs pandas)."""
        from dataclasses import asdict

        try:
            import pandas  # type: ignore[import-untyped]  # pandas-stubs not installed
        except ImportError:
            raise ImportError("Sweep.to_pandas needs pandas, which is not installed: pip install pandas") from None
        return pandas.DataFrame([{"name": r.scenario.name, "seed": r.scenario.seed,
                                  "compressor": r.scenario.compression.name, **asdict(r.summary)} for r in self.runs])


def sweep(scenario: Scenario | dict[str, Any] | str | Path, grid: Mapping[str, Sequence[Any]] | None = None, *,
          seeds: Sequence[int] | None = None, out: str | Path | None = None, overwrite: bool = False,
          jobs: int = 1, quiet: bool = True) -> Sweep:
    """Run every combination of ``grid``'s values (``{dotted key: [values]}``, the keys ``--sweep``
    takes) and of ``seeds``, each as a normal run; ``jobs`` points at a time, each in its own process.
    ``out``: the sweep folder (``OUT/KEY=VALUE,.../`` per point and ``report.md``, as ``fedgc run
    --sweep`` writes; new or empty, or cleared with ``overwrite``); None keeps nothing on disk."""
    from fedgc.runs.folder import claim_folder
    from fedgc.sweeps.plan import SweepAxis, SweepError
    from fedgc.sweeps.runner import run_sweep

    expect(isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1, "jobs", jobs, "a whole number ≥ 1")
    expect(grid is None or (isinstance(grid, Mapping) and all(
        isinstance(k, str) and isinstance(v, Sequence) and not isinstance(v, str) for k, v in grid.items())),
        "grid", grid, "a dict of dotted keys to lists of values ({'compression.density': [0.1, 0.01]})")
    expect(seeds is None or (isinstance(seeds, Sequence) and not isinstance(seeds, str)), "seeds", seeds,
           "a list of seeds")
    if out is not None:
        path_argument(out, "out", "a sweep folder's path")
    base = as_scenario(scenario)
    axes = [SweepAxis.of(key, list(values)) for key, values in (grid or {}).items()]
    if seeds is not None:
        axes.append(SweepAxis.of("seed", list(seeds)))
    if not axes:
        raise SweepError("sweep: give a grid or seeds (a single run is fedgc.run)")
    tree = base.model_dump(mode="json")

    def run_into(out_dir: Path) -> list[Run]:
        with claim_folder(out_dir, overwrite=overwrite):
            points = run_sweep(tree, axes, out_dir, quiet=quiet, jobs=jobs)
        return [load_run(point.out_dir) for point in points]

    return Sweep(*runs_in(out, "sweep", run_into))


def load_sweep(path: str | Path) -> Sweep:
    """A sweep folder written by ``fedgc run --sweep`` or ``fedgc.sweep(..., out=...)``, read back."""
    from fedgc.reports.run_reports import RunFolderError, run_folders

    folder = path_argument(path, "load_sweep's path", "a sweep folder's path")
    try:
        folders = run_folders([folder])
    except OSError as err:  # a name too long, a folder it may not read: one line
        raise RunFolderError(f"{str(folder)[:200]}: cannot read it ({err.strerror or type(err).__name__})") from None
    if folders == [folder]:
        raise RunFolderError(f"{folder}: not a sweep folder (no run folders inside)")
    return Sweep([load_run(p) for p in folders], folder)
