"""``fedgc submit APP CONNECTION --run-config FILE [--log FILE]``: ``flwr run APP CONNECTION
--run-config FILE --stream`` for a real deployment, which says how the run ended and exits 1 when it
failed. Flower's own ``flwr run`` exits 0 even when the ServerApp raised; this asks the SuperLink
(``fedgc.flower.runtime.runtime_processes.flwr_run``). The SuperLink connection is Flower's, from
``$FLWR_HOME/config.toml`` (docs/deploy-edge.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fedgc.flower.runtime.runtime_processes import flwr_run, started_run_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fedgc submit", description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("app", help="the Flower app folder (this repository: .)")
    parser.add_argument("connection", help="the SuperLink connection named in $FLWR_HOME/config.toml")
    parser.add_argument("--run-config", required=True, metavar="FILE", help="run config TOML (scenario, out-dir)")
    parser.add_argument("--log", default="flwr-run.log", metavar="FILE", help="where Flower's log stream goes")
    args = parser.parse_args(argv)
    log = Path(args.log)
    start = log.stat().st_size if log.exists() else 0
    try:
        result = flwr_run(Path(args.app), args.connection, Path(args.run_config), dict(os.environ), log)
    except OSError as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return 2
    run_id = started_run_id(log, start)
    if result.returncode != 0:
        ended = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        print(f"error: the run failed ({ended[0] if ended else 'no log'}); Flower's log: {log}", file=sys.stderr)
        return 1
    print(f"run {run_id} completed; Flower's log: {log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
