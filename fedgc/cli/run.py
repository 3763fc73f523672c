"""``python -m fedgc run SCENARIO.yaml [--out DIR [--overwrite]] [--set KEY=VALUE ...] [--quiet]``
or ``python -m fedgc run --resume RUN_DIR`` (continue a stopped run from its last checkpoint).

Every run gets a folder of its own, locked while the run writes it (``fedgc.runs.folder``): the default
``runs/<name>-<timestamp>`` never collides, an ``--out`` folder holding files is refused unless
``--overwrite`` (which clears it first), and a folder in use by another process is refused.

Exit codes: 0 success; 2 the scenario or its inputs are invalid (one line on stderr, no traceback);
3 the run stopped early: training diverged (the model became non-finite) or went idle (no update
applied for ``strategy.max_idle_rounds`` attempts), or it ran every round without applying one update
(``no_update_applied``); the last good model is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from shlex import quote
from typing import Any, cast

from fedgc.bounded import write_whole, writing
from fedgc.core.stop import INTERRUPTED
from fedgc.invocation import as_invoked, seconds_since_start
from fedgc.reports.compare import human_summary
from fedgc.runs.engines import EXIT_DIVERGED, EXIT_INVALID
from fedgc.runs.folder import claim_folder, lock_existing, new_run_folder
from fedgc.scenario.errors import ScenarioError
from fedgc.scenario.model import Scenario, dump_scenario, load_scenario
from fedgc.sweeps.jobs import default_jobs, parse_jobs

__all__ = ["EXIT_DIVERGED", "EXIT_INVALID", "main"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fedgc run", description="Run a scenario: train the model over the simulated network and write a run "
        "folder (scenario.yaml, metrics.jsonl, summary.json, plots/, model.pt; docs/metrics.md).",
        epilog="Exit status: 0 done; 2 the scenario or its inputs are invalid (one line on stderr); 3 the run "
               "stopped early or applied no update (diverged, idle, no_update_applied; model.pt holds the last good "
               "model); 130 interrupted.")
    parser.add_argument("scenario", nargs="?", help="scenario YAML file, or the name of a built-in scenario "
                        "(fedgc scenarios lists them) when no such file is here (not with --resume)")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue the run in RUN_DIR from its last checkpoint (same scenario and seed); "
                             "given a sweep folder, finish the sweep")
    parser.add_argument("--out", help="output folder (default runs/<name>-<timestamp>); must be new or empty")
    parser.add_argument("--overwrite", action="store_true",
                        help="with --out: clear that folder first if it holds a previous run")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key, e.g. --set compression.density=0.001 (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument("--json", action="store_true", help="print the run's summary as JSON on stdout "
                        "(it is always in summary.json) instead of the human summary")
    parser.add_argument("--tensorboard", action="store_true",
                        help="also write TensorBoard event files into RUN/tensorboard/ (needs the tensorboard package)")
    parser.add_argument("--baseline", action="store_true",
                        help="run the scenario beside its baselines (no compression; both directions "
                             "compressed) and print what compression bought, as a table")
    parser.add_argument("--check", action="store_true",
                        help="validate the scenario, load its data and build its model and network, then exit "
                             "without training (= fedgc check --deep)")
    parser.add_argument("--sweep", dest="sweeps", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="run every combination of the swept values into OUT/KEY=VALUE/ and write "
                             "OUT/report.md (repeatable; docs/metrics.md, section Sweeps)")
    parser.add_argument("--seeds", metavar="S1,S2,...",
                        help="run each seed into its own folder (= --sweep seed=S1,S2,...; combines with --sweep)")
    parser.add_argument("--jobs", type=parse_jobs, default=None, metavar="N",
                        help="with --sweep or --seeds: run N points at a time, each in its own process (default: "
                             "the number of cores); the results are those of one at a time")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.seeds is not None:
        args.sweeps.append(f"seed={args.seeds}")
    if args.sweeps:
        from fedgc.sweeps.runner import sweep_main

        return sweep_main(args.scenario, args.overrides, args.sweeps, args.out, args.quiet,
                          resume=args.resume, check=args.check, overwrite=args.overwrite,
                          jobs=args.jobs or default_jobs())
    if args.resume and args.scenario is None and not (args.out or args.overrides or args.overwrite or args.check):
        from fedgc.sweeps.plan import is_sweep_folder
        from fedgc.sweeps.runner import resume_sweep

        if is_sweep_folder(Path(args.resume)):
            return resume_sweep(Path(args.resume), args.quiet, jobs=args.jobs or default_jobs())
    if (args.scenario is None) == (args.resume is None):
        print("error: give a scenario file, or --resume RUN_DIR (not both)", file=sys.stderr)
        return EXIT_INVALID
    if args.resume and (args.out or args.overrides or args.overwrite):
        print("error: --resume continues the run as it was: --out, --overwrite and --set do not apply",
              file=sys.stderr)
        return EXIT_INVALID
    if args.overwrite and not args.out:
        print("error: --overwrite needs --out (the default folder is always new)", file=sys.stderr)
        return EXIT_INVALID
    if args.tensorboard:
        import importlib.util

        if importlib.util.find_spec("tensorboard") is None:
            print("error: --tensorboard needs the tensorboard package: pip install 'fedgc[tensorboard]'", file=sys.stderr)
            return EXIT_INVALID
    if args.baseline and (args.resume or args.check):
        print("error: --baseline runs a new comparison: not with --resume or --check (resume one of its run "
              "folders instead)", file=sys.stderr)
        return EXIT_INVALID
    lock = None
    try:
        if args.resume:
            out_dir = Path(args.resume)
            lock = lock_existing(out_dir)  # before reading anything: a running run's folder is refused
            refuse_resume_unimported(out_dir)  # before any plugin is imported or run
            scenario = load_scenario(out_dir / "scenario.yaml")
        else:
            scenario = load_scenario(args.scenario, args.overrides)
        from fedgc.core.parts import federated_data
        from fedgc.plugins.registry import running

        with running("dataset", scenario.data.dataset):  # a user's data set: what it raises is one line
            data = federated_data(scenario)  # load and partition now, so bad data fails fast with exit 2
        if args.check:
            from fedgc.scenario.readiness import deep_report

            print(f"ok: {deep_report(scenario, data)}")
            return 0
        if not args.resume:
            if args.out:
                out_dir = Path(args.out)
                lock = claim_folder(out_dir, overwrite=args.overwrite)
            else:
                out_dir, lock = new_run_folder(f"{scenario.name}-compare" if args.baseline else scenario.name)
            if args.baseline:
                return _compare(scenario, out_dir, args)
            with writing(out_dir / "scenario.yaml"):
                write_whole(out_dir / "scenario.yaml", dump_scenario(scenario))
        from fedgc.api.runs import run_in_folder  # what fedgc.run does: one code path

        summary = run_in_folder(scenario, out_dir, quiet=args.quiet, resume=bool(args.resume)).summary
    except (ScenarioError, ValueError, OSError) as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if lock is not None:
            lock.release()
    if args.tensorboard:
        from fedgc.reports.tensorboard import TensorBoardUnavailable, write_events

        try:
            write_events(out_dir)
        except (TensorBoardUnavailable, OSError, ValueError) as err:
            print(f"error: {err}".splitlines()[0], file=sys.stderr)
            return EXIT_INVALID
    print(json.dumps(asdict(summary), indent=2) if args.json else human_summary(summary, out_dir, seconds_since_start()))
    if summary.stopped_reason == INTERRUPTED:
        print(f"interrupted after round {summary.rounds}; resume with: {as_invoked('run')} --resume {quote(str(out_dir))}",
              file=sys.stderr)
        return 130
    if summary.stopped_reason != "completed":
        print(f"error: run stopped early ({summary.stopped_reason}); model.pt holds the last good model",
              file=sys.stderr)
        return EXIT_DIVERGED
    return 0


def refuse_resume_unimported(out_dir: Path) -> None:
    """The refusals of ``--resume`` that need none of the scenario's plugins, made before any is imported
    or run (``CheckpointError``, one line): no checkpoint, or one changed, unreadable or of another format;
    a ``scenario.yaml`` that differs from the checkpoint's scenario, all of it when the scenario names no
    plugin this process has not loaded, else in the plugins' names (their options are compared once
    they are imported)."""
    from fedgc.core import checkpoint
    from fedgc.plugins.registry import PLUGIN_KEYS

    scenario = load_scenario(out_dir / "scenario.yaml", imports=False)
    if not scenario.unchecked_plugins:
        checkpoint.resumable(out_dir, scenario)
        return
    _, record = checkpoint.load(out_dir)
    saved = cast("dict[str, Any]", record.get("fields") if isinstance(record.get("fields"), dict) else {})  # a dict
    changed = [f"{section}.{key}" for section, key, _ in PLUGIN_KEYS
               if saved.get(f"{section}.{key}", "<absent>") != getattr(getattr(scenario, section), key)]
    if changed:
        raise checkpoint.CheckpointError(f"--resume {out_dir}: scenario.yaml differs from the scenario of the "
                                         f"checkpoint in {', '.join(changed)}; start a new run to change it")


def _compare(scenario: Scenario, out_dir: Path, args: argparse.Namespace) -> int:
    """``--baseline``: the scenario and its baselines into ``out_dir``, then the table (fedgc.reports.compare)."""
    from fedgc.reports.compare import comparison_table, reading, run_comparison, write_comparison

    results = run_comparison(scenario, out_dir, quiet=args.quiet, log=lambda line: print(line, file=sys.stderr))
    write_comparison(results, out_dir)
    if args.tensorboard:
        from fedgc.reports.tensorboard import write_events

        for result in results:
            write_events(cast(Path, result.out_dir))  # run into out_dir: each variant has its folder
    if args.json:
        print(json.dumps({r.variant.label: asdict(r.summary) for r in results}, indent=2))
    else:
        print(f"{comparison_table(results)}\n\n{reading(results)}\noutputs in {out_dir} (comparison.md)")
    last = results[-1]
    if last.summary.stopped_reason == INTERRUPTED:
        print(f"interrupted after round {last.summary.rounds} of {last.variant.label}; resume that run with: "
              f"{as_invoked('run')} --resume {quote(str(last.out_dir))}", file=sys.stderr)
        return 130
    return 0 if last.summary.stopped_reason == "completed" else EXIT_DIVERGED


def command() -> int:
    """``main`` as the command of its own process: the processes a Flower runtime leaves behind are
    re-parented to it, so its clean-up finds them all (fedgc.runs.process_tree.adopt_orphans)."""
    from fedgc.runs.process_tree import adopt_orphans

    adopt_orphans()
    return main()


if __name__ == "__main__":
    sys.exit(command())
