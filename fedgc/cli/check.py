"""``fedgc check SCENARIO [--deep]``: is the scenario ready to run? Train nothing.

Without ``--deep`` (a few seconds): the scenario is validated, every file it names is found (the
data set's files, traces, capacity and availability files: a missing one names the ``fedgc fetch``
command that gets it) and every client's link, device and availability process is built, without
loading the training data. It reads only: a plugin the scenario names (an import path, an installed
plugin's name) is checked by name and never imported or called. ``--deep`` (``python -m
fedgc.cli.run SCENARIO --check``) also loads and partitions the data and builds the model, which
imports and runs the scenario's plugins (what a plugin raises, or a ``SystemExit``, is one line naming
it, exit 2), so a scenario that passes it fails later only for reasons of training itself
(divergence, running out of memory).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedgc.scenario.readiness import quick_check


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fedgc check",
        description="Check that a scenario is ready to run, without training: validate it, find every file it "
                    "names (data set, traces) and build every client's network. A missing file names the "
                    "'fedgc fetch' command that gets it. Without --deep nothing of the user's runs: a plugin "
                    "(import path or installed plugin) is checked by name only. Exit status 0 when ready, 2 with "
                    "a one-line error.")
    parser.add_argument("scenario", help="scenario YAML file, or the name of a built-in scenario (fedgc scenarios)")
    parser.add_argument("--deep", action="store_true",
                        help="also load and partition the training data and build the model (slower); this "
                             "imports and runs the plugins the scenario names (its model, dataset, compressor...)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key, e.g. --set compression.density=0.001 (repeatable)")
    parser.add_argument("--sweep", dest="sweeps", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="check every point of the sweep (implies --deep; repeatable)")
    parser.add_argument("--seeds", metavar="S1,S2,...", help="check each seed (= --sweep seed=S1,S2,...)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """``fedgc check``; returns the exit code."""
    args = parse_args(argv)
    if args.deep or args.sweeps or args.seeds is not None:
        from fedgc.cli.run import main as simulate

        extra = [*(f"--set={o}" for o in args.overrides), *(f"--sweep={s}" for s in args.sweeps),
                 *([f"--seeds={args.seeds}"] if args.seeds is not None else [])]
        return simulate([args.scenario, *extra, "--check"])
    from fedgc.scenario.errors import ScenarioError
    from fedgc.scenario.model import load_scenario

    try:
        scenario = load_scenario(Path(args.scenario), args.overrides, imports=False)
        unchecked = (f"; plugins checked by name only, not imported: {', '.join(scenario.unchecked_plugins)} "
                     "(--deep imports and runs them)") if scenario.unchecked_plugins else ""
        print(f"ok: {quick_check(scenario)}{unchecked}")
    except (ScenarioError, ValueError, OSError) as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return 2
    return 0

