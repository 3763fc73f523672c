"""Sweeps: ``python -m fedgc run SCENARIO --sweep compression.name=none,topk,dgc [--sweep KEY=A,B ...]``

Runs the cartesian product of the swept values, each point a normal run folder under the output
folder (``OUT/compression.name=none/``; with several keys ``OUT/compression.name=none,client.lr=0.1/``),
then writes the comparison (``OUT/report.md`` and the overlay plots, see ``fedgc.reports.run_reports``) and prints
its table. ``--set`` applies to every point; a swept key wins over a ``--set`` of the same key.
Values are parsed like ``--set`` values (YAML: numbers, booleans, null) and cannot contain commas.
``--seeds 0,1,2`` is ``--sweep seed=0,1,2``; the report groups runs that differ only by seed.

``python -m fedgc run --resume OUT`` (or the same sweep command again with ``--out OUT``)
finishes an interrupted sweep: the sweep folder keeps its
plan (``OUT/sweep.yaml``: the scenario with the ``--set`` overrides applied, and the swept axes);
points that finished are kept as they are, a point with a checkpoint resumes from it (same metrics
as an uninterrupted run), and the others run from the start.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information (types-PyYAML not installed)

from fedgc.bounded import SCENARIO_MAX_BYTES, read_text, write_whole
from fedgc.core.stop import INTERRUPTED
from fedgc.plugins.registry import Carried
from fedgc.runs.metrics import Summary
from fedgc.scenario.errors import ScenarioError
from fedgc.scenario.model import Scenario, dump_scenario, load_tree, parse_override, set_dotted
from fedgc.sweeps.plan import (
    MANIFEST,
    SweepAxis,
    SweepError,
    SweepPoint,
    check_points,
    is_sweep_folder,
    plan,
    plan_digest,
    read_manifest,
)


@dataclass(frozen=True)
class SweepRun:
    point: SweepPoint
    out_dir: Path
    summary: Summary


def run_point(scenario: Scenario, out_dir: Path, *, quiet: bool = True, overwrite: bool = True) -> Summary:
    """One normal run folder (``scenario.yaml``, ``metrics.jsonl``, ``summary.json``, ``plots/``, ``model.pt``),
    locked while it runs. From Python (notebooks) a folder holding an earlier run is cleared first, so
    re-running a cell never mixes two runs; ``overwrite=False`` refuses such a folder instead."""
    from fedgc.runs.engines import run_scenario
    from fedgc.runs.folder import claim_folder

    with claim_folder(out_dir, overwrite=overwrite):
        write_whole(out_dir / "scenario.yaml", dump_scenario(scenario))
        return run_scenario(scenario, out_dir, quiet=quiet)


def _run_or_resume(point: SweepPoint, scenario: Scenario, folder: Path, *, quiet: bool, resume: bool) -> Summary:
    """A point's run: with ``resume``, a finished point is read back, one with a checkpoint continues
    from it, and one without is run again from the start (its folder cleared)."""
    from fedgc.reports.run_reports import read_run
    from fedgc.runs.engines import run_scenario
    from fedgc.runs.folder import CHECKPOINT, lock_existing

    def same_plan() -> None:
        """A point folder written for another plan is never read or continued as this plan's."""
        try:
            written = read_text(folder / "scenario.yaml", "scenario", SCENARIO_MAX_BYTES)
        except ValueError:
            written = None
        if written != dump_scenario(scenario):
            raise SweepError(f"its scenario.yaml differs from the sweep's plan ({MANIFEST})")

    if resume and (folder / "summary.json").is_file():
        same_plan()
        summary = read_run(folder).summary
        if summary.stopped_reason != INTERRUPTED:  # an interrupted point continues from its checkpoint
            return summary
    if resume and (folder / CHECKPOINT).is_file():
        with lock_existing(folder):
            same_plan()
            return run_scenario(scenario, folder, quiet=quiet, resume=True)
    return run_point(scenario, folder, quiet=quiet, overwrite=resume)


def _point_task(task: tuple[SweepPoint, Scenario | bytes, Path, bool, bool, Carried | None]) -> Summary:
    """One point of a sweep, in this process or a worker (``fedgc.sweeps.jobs``); errors name the point.
    In a worker, ``carried`` plugins are registered first, then the point's scenario (pickled, since
    unpickling it may need a plugin's module) is read back."""
    point, scenario, folder, quiet, resume, carried = task
    try:
        if carried is not None:
            from fedgc.plugins.registry import register_carried

            register_carried(carried)
        if isinstance(scenario, bytes):
            scenario = pickle.loads(scenario)  # written by this sweep's own process
        summary = _run_or_resume(point, scenario, folder, quiet=quiet, resume=resume)
    except (ValueError, OSError) as err:
        raise SweepError(f"{point.folder}: {err}".splitlines()[0]) from None
    if summary.stopped_reason == INTERRUPTED:  # Ctrl-C: the sweep stops too (--resume finishes it)
        raise KeyboardInterrupt
    return summary


def _pickled(point: SweepPoint, scenario: Scenario, jobs: int) -> bytes:
    """A point's scenario as a worker reads it back (after registering the plugins it names)."""
    try:
        return pickle.dumps(scenario)
    except (pickle.PicklingError, TypeError, AttributeError) as err:
        raise SweepError(f"jobs={jobs}: {point.folder}: its scenario cannot be sent to a worker process "
                         f"({type(err).__name__}: {err}); run the sweep with jobs=1".splitlines()[0][:300]) from None


def run_sweep(base_tree: dict[str, Any], axes: list[SweepAxis], out_dir: Path, *, quiet: bool = True,
              log: Callable[[str], object] | None = None, resume: bool = False, jobs: int = 1) -> list[SweepRun]:
    """Run every point into ``out_dir/<point folder>`` and write ``out_dir/report.md`` with its plots
    (with ``resume``, finish the sweep in ``out_dir``: see the module's docstring). ``jobs``: points
    run at a time, each in its own process (``fedgc.sweeps.jobs``; the same files as one at a time).
    ``log``: a callable taking one line of progress (e.g. ``print``), or None for silence."""
    from fedgc.reports.run_reports import read_runs, write_report

    planned = plan(base_tree, axes)
    carried = None
    if jobs > 1 and len(planned) > 1:  # the points run in fresh processes: they must know the same plugins
        from fedgc.plugins.import_paths import PluginError
        from fedgc.plugins.registry import carried_plugins

        try:  # before anything is written or any worker starts
            carried = carried_plugins([scenario for _, scenario in planned])
        except PluginError as err:
            raise SweepError(f"jobs={jobs}: {err}") from None
    tasks = [(point, scenario if carried is None else _pickled(point, scenario, jobs), out_dir / point.folder,
              quiet or jobs > 1, resume, carried) for point, scenario in planned]
    if not resume:
        specs = [a.spec for a in axes]
        write_whole(out_dir / MANIFEST, yaml.safe_dump(
            {"scenario": base_tree, "sweep": specs, "digest": plan_digest(base_tree, specs)}, sort_keys=False))
    from fedgc.sweeps.jobs import run_all


    def started(index: int) -> None:
        if log is not None:
            done = resume and (tasks[index][2] / "summary.json").is_file()
            log(f"[{index + 1}/{len(planned)}] {planned[index][0].folder}" + (" (done)" if done else ""))

    summaries = run_all(_point_task, tasks, jobs, started)
    runs = [SweepRun(task[0], task[2], summary) for task, summary in zip(tasks, summaries)]
    write_report(read_runs([run.out_dir for run in runs]), out_dir, "md")
    return runs


def sweep_main(scenario_path: str | None, overrides: list[str], sweeps: list[str], out: str | None,
               quiet: bool, resume: str | None = None, check: bool = False, overwrite: bool = False,
               jobs: int = 1) -> int:
    """The ``--sweep`` path of ``python -m fedgc run``; returns the exit code. With ``check``,
    every point is checked (``--check``) and nothing runs. The sweep folder is claimed like a run
    folder (``fedgc.runs.folder``: new or empty, or cleared with ``overwrite``) and locked until the
    report is written; every point folder inside it is new."""
    from fedgc.runs.engines import EXIT_INVALID
    from fedgc.runs.folder import claim_folder, lock_existing, new_run_folder

    def fail(message: str) -> int:
        print(f"error: {message}".splitlines()[0], file=sys.stderr)
        return EXIT_INVALID

    if resume is not None:
        return fail("--sweep starts a sweep; to finish an interrupted one give only --resume SWEEP_DIR "
                    "(--resume does not apply with --sweep)")
    if scenario_path is None:
        return fail("--sweep needs a scenario file")
    try:
        tree = load_tree(scenario_path)
        for text in overrides:
            set_dotted(tree, *parse_override(text))
        axes = [SweepAxis.parse(spec) for spec in sweeps]
        if check:
            print("\n".join(f"ok: {line}" for line in check_points(tree, axes)))
            return 0
        first_point_scenario = plan(tree, axes)[0][1]
        # cast: out is a non-empty str wherever it is read here (bool(out) before it)
        again = bool(out) and not overwrite and is_sweep_folder(Path(cast(str, out)))
        if again:  # the same sweep command again: finish it (anything else there is refused)
            out_dir, lock = Path(cast(str, out)), lock_existing(Path(cast(str, out)))
            if read_manifest(out_dir) != (tree, axes):
                lock.release()
                raise SweepError(f"--out {out_dir} holds another sweep (its {MANIFEST} differs): choose a new "
                                 "folder, or add --overwrite to clear it first")
        elif out:
            out_dir, lock = Path(out), claim_folder(Path(out), overwrite=overwrite)
        else:
            out_dir, lock = new_run_folder(first_point_scenario.name)
        with lock:
            runs = run_sweep(tree, axes, out_dir, quiet=quiet, resume=again, jobs=jobs,
                             log=lambda line: print(line, file=sys.stderr))
    except (ScenarioError, SweepError, ValueError, OSError) as err:
        return fail(str(err))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return _finish(out_dir, runs)


def resume_sweep(out_dir: Path, quiet: bool, jobs: int = 1) -> int:
    """``--resume SWEEP_DIR``: finish the sweep in ``out_dir``; returns the exit code."""
    from fedgc.runs.engines import EXIT_INVALID
    from fedgc.runs.folder import lock_existing

    try:
        with lock_existing(out_dir):
            tree, axes = read_manifest(out_dir)
            runs = run_sweep(tree, axes, out_dir, quiet=quiet, resume=True, jobs=jobs,
                             log=lambda line: print(line, file=sys.stderr))
    except (ScenarioError, SweepError, ValueError, OSError) as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return _finish(out_dir, runs)


def _finish(out_dir: Path, runs: list[SweepRun]) -> int:
    from fedgc.runs.engines import EXIT_DIVERGED

    sys.stdout.write((out_dir / "report.md").read_text(encoding="utf-8"))
    print(f"{len(runs)} runs and report.md in {out_dir}", file=sys.stderr)
    stopped = [run.point.folder for run in runs if run.summary.stopped_reason != "completed"]
    if stopped:
        print(f"error: {len(stopped)} run(s) stopped early: {', '.join(stopped)}", file=sys.stderr)
        return EXIT_DIVERGED
    return 0
