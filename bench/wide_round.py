"""Benchmark: wide rounds — 100 to 1,000 clients per round of ``mnist_2nn`` on the CPU.

A population of ``--population`` clients (default 1,000) of ``mnist_2nn`` with DGC (as in
``bench/population.py``: MNIST Dirichlet α = 0.5, 1% density, momentum correction and masking, one
local step of batch 10, ``lte`` links, the disk client-state store), ``--rounds`` rounds (default 2)
at each of ``--per-round`` clients per round (default 100, 300, 1000), the round's clients trained
together by the vectorized executor (``client.execution: vectorized``; ``--execution sequential`` to
compare). Each width runs in its own child process and reports the wall time per round and its split
(``bench/round_split.py``: training, compression, state I/O, wire serialization, the rest of the
clients' turns, the network model, aggregation, the round loop's other work) and its peak RSS; the
growth from the narrowest to the widest round is the ratio of times per round.

    .venv/bin/python bench/wide_round.py [--per-round 100,300,1000] [--rounds 2] [--execution vectorized]

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
REPO = Path(__file__).resolve().parents[1]


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from population import scenario
    from round_split import RoundSplit

    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.loop import run_rounds
    from fedgc.scenario.model import validate

    tree = scenario(args.population, int(args.per_round), args.rounds, "disk", args.data_root)
    tree["client"]["execution"] = args.execution
    sc = validate(tree)
    grid = InlineGrid.for_scenario(sc)
    split = RoundSplit(grid)
    t0 = time.perf_counter()
    summary = run_rounds(grid, sc, None)
    wall = time.perf_counter() - t0
    print(json.dumps({
        "per_round": int(args.per_round), "population": args.population, "rounds": args.rounds,
        "execution": args.execution, "time_per_round_s": round(wall / args.rounds, 3),
        "time_per_client_ms": round(1000 * wall / args.rounds / int(args.per_round), 2),
        "split_per_round_s": split.per_round(args.rounds, wall),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9, 3),
        "final_accuracy": summary.final_accuracy,
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-round", default="100,300,1000", help="comma-separated clients per round")
    parser.add_argument("--population", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--execution", choices=["vectorized", "sequential"], default="vectorized")
    parser.add_argument("--data-root", default=str(REPO.parent / "shared" / "data" / "mnist"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    runs = []
    for width in sorted(int(w) for w in args.per_round.split(",")):
        cmd = [sys.executable, __file__, "--child", "--per-round", str(width), "--population", str(args.population),
               "--rounds", str(args.rounds), "--execution", args.execution, "--data-root", args.data_root]
        proc = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-3000:])
            raise SystemExit(f"child ({width} clients per round) failed with exit code {proc.returncode}")
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        split = ", ".join(f"{k} {v:.2f}" for k, v in report["split_per_round_s"].items())
        print(f"{width:5d} clients/round: {report['time_per_round_s']:.2f} s/round "
              f"({report['time_per_client_ms']:.1f} ms/client), peak RSS {report['peak_rss_gb']:.2f} GB; {split}",
              flush=True)
        runs.append(report)
    result = {"population": args.population, "execution": args.execution, "runs": runs}
    if len(runs) > 1:
        result["growth_time_per_round"] = round(runs[-1]["time_per_round_s"] / runs[0]["time_per_round_s"], 3)
        result["growth_clients_per_round"] = round(runs[-1]["per_round"] / runs[0]["per_round"], 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
