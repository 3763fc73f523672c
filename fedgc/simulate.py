"""``python -m fedgc.simulate SCENARIO.yaml [--out DIR] [--set KEY=VALUE ...] [--quiet]``
or ``python -m fedgc.simulate --resume RUN_DIR`` (continue a stopped run from its last checkpoint).

Exit codes: 0 success; 2 the scenario or its inputs are invalid (one line on stderr, no traceback);
3 training diverged (the model became non-finite; the last good model is kept).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from fedgc.scenario import ScenarioError, dump_scenario, load_scenario

EXIT_INVALID = 2
EXIT_DIVERGED = 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m fedgc.simulate", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", help="scenario YAML file (not with --resume)")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue the run in RUN_DIR from its last checkpoint (same scenario and seed)")
    parser.add_argument("--out", help="output folder (default runs/<name>-<timestamp>)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key, e.g. --set compression.density=0.001 (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--check", action="store_true",
                        help="validate the scenario and load its data, model and network, then exit without training")
    parser.add_argument("--sweep", dest="sweeps", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="run every combination of the swept values into OUT/KEY=VALUE/ and write "
                             "OUT/report.md (repeatable; see fedgc/sweep.py)")
    return parser.parse_args(argv)


def default_out_dir(name: str) -> Path:
    return Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sweeps:
        from fedgc.sweep import sweep_main

        return sweep_main(args.scenario, args.overrides, args.sweeps, args.out, args.quiet,
                          resume=getattr(args, "resume", None), check=getattr(args, "check", False))
    if (args.scenario is None) == (args.resume is None):
        print("error: give a scenario file, or --resume RUN_DIR (not both)", file=sys.stderr)
        return EXIT_INVALID
    if args.resume and (args.out or args.overrides):
        print("error: --resume continues the run as it was: --out and --set do not apply", file=sys.stderr)
        return EXIT_INVALID
    try:
        if args.resume:
            out_dir = Path(args.resume)
            scenario = load_scenario(out_dir / "scenario.yaml")
        else:
            scenario = load_scenario(args.scenario, args.overrides)
            out_dir = Path(args.out) if args.out else default_out_dir(scenario.name)
        from fedgc.engines import ENGINES
        from fedgc.flower.setup import federated_data

        data = federated_data(scenario)  # load and partition now, so bad data fails fast with exit 2
        if args.check:
            from fedgc.check import check_scenario

            print(f"ok: {check_scenario(scenario, data)}")
            return 0
        out_dir.mkdir(parents=True, exist_ok=True)
        if not args.resume:
            (out_dir / "scenario.yaml").write_text(dump_scenario(scenario))
        summary = ENGINES[scenario.engine](scenario, out_dir, quiet=args.quiet, resume=bool(args.resume))
    except (ScenarioError, ValueError, OSError) as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(json.dumps(asdict(summary), indent=2))
    print(f"outputs in {out_dir}", file=sys.stderr)
    if summary.stopped_reason != "completed":
        print(f"error: run stopped early ({summary.stopped_reason}); model.pt holds the last good model",
              file=sys.stderr)
        return EXIT_DIVERGED
    return 0


if __name__ == "__main__":
    sys.exit(main())
