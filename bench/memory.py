"""Benchmark: peak memory of 1,000 stateful DGC clients of the MNIST CNN (1,663,370 parameters).

The run: real MNIST split iid over ``--clients`` clients (60 samples each at 1,000), McMahan et al.'s
CNN (``mnist_cnn``), DGC at 1% density with momentum correction and masking (the client keeps a
momentum u and a velocity v per parameter between rounds, plus the updates it sent but has not yet
heard were applied), ``--fraction`` of the clients per round, ``--rounds`` rounds, one local step of
batch 10, the inline engine with ``lte`` links.

Naive bookkeeping (fp32 u and v for every client) needs 2 · 4 B · 1,663,370 · 1,000 = 13.3 GB.
Each run happens in a child process, which reports its own peak resident set size (``ru_maxrss``),
how many clients hold state and how many bytes their states take at the end. By default the same run
twice, side by side: with ``client_state.store: disk`` (the states in an SQLite file, loaded for a
client's turn) and ``memory`` (every state in RAM). Target: the disk run's peak RSS <= 6 GB with the
in-memory run's final accuracy (and bytes: the runs are the same run).

    .venv/bin/python bench/memory.py [--clients 1000] [--rounds 5] [--fraction 0.1] [--momentum-dtype bf16]
                                     [--store both|disk|memory]

``--momentum-dtype bf16`` measures the opt-in precision trade-off ``compression.momentum_dtype: bf16``
(u stored in bfloat16 between rounds, v exact in fp32: 6 instead of 8 B/param).

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

REPO = Path(__file__).resolve().parents[1]
NAIVE_BYTES_PER_PARAM = 8  # fp32 momentum + fp32 velocity


def scenario(clients: int, rounds: int, fraction: float, root: str) -> dict:
    return {
        "name": "bench-memory", "seed": 0, "rounds": rounds,
        "data": {"dataset": "mnist", "root": root, "num_clients": clients, "partition": "iid",
                 "max_test_samples": 1000},
        "model": {"name": "mnist_cnn"},
        "client": {"local_steps": 1, "batch_size": 10, "lr": 0.05},
        "compression": {"name": "dgc", "density": 0.01},
        "strategy": {"fraction": fraction},
        "network": {"profile": "lte"},
        "eval": {"every": rounds, "batch_size": 500},
    }


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)

    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.loop import run_rounds
    from fedgc.models import build_model, parameter_count
    from fedgc.scenario.model import validate

    tree = scenario(args.clients, args.rounds, args.fraction, args.data_root)
    tree["compression"]["momentum_dtype"] = args.momentum_dtype  # the scenario key compression.momentum_dtype
    tree["client_state"] = {"store": args.store}  # the scenario key client_state.store
    sc = validate(tree)
    grid = InlineGrid.for_scenario(sc)  # no run folder: a disk store lives in a temporary folder
    t0 = time.perf_counter()
    summary = run_rounds(grid, sc, None)
    wall = time.perf_counter() - t0
    holding = grid.store.clients()
    total = grid.store.nbytes()
    params = parameter_count(build_model("mnist_cnn", (1, 28, 28), 10, 0))
    print(json.dumps({
        "clients_with_state": len(holding),
        "state_bytes": total,
        "state_bytes_per_stateful_client": total / len(holding) if holding else 0,
        "params": params,
        "final_accuracy": summary.final_accuracy,
        "bytes_up": summary.bytes_up,
        "run_s": round(wall, 2),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # KiB on Linux
    }))


def run_child(args: argparse.Namespace, store: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--child", "--clients", str(args.clients), "--rounds", str(args.rounds),
           "--fraction", str(args.fraction), "--data-root", args.data_root, "--momentum-dtype", args.momentum_dtype,
           "--store", store]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"child ({store} store) failed with exit code {proc.returncode}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    report["wall_s"] = time.perf_counter() - t0
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--data-root", default=str(REPO.parent / "shared" / "data" / "mnist"))
    parser.add_argument("--momentum-dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--store", choices=["disk", "memory", "both"], default="both",
                        help="client_state.store of the run; both: disk and memory, one after the other")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    stores = ["disk", "memory"] if args.store == "both" else [args.store]
    reports = {store: run_child(args, store) for store in stores}
    params = next(iter(reports.values()))["params"]
    naive = NAIVE_BYTES_PER_PARAM * params * args.clients
    print(f"clients {args.clients}, rounds {args.rounds}, fraction {args.fraction}, momentum {args.momentum_dtype}")
    print(f"naive fp32 u+v, all clients  {naive / 1e9:8.3f} GB")
    for store, report in reports.items():
        print(f"{store:6s} store: peak RSS {report['peak_rss_bytes'] / 1e9:6.3f} GB (target <= 6), "
              f"{report['clients_with_state']} clients hold {report['state_bytes'] / 1e9:.3f} GB of state "
              f"({report['state_bytes_per_stateful_client'] / params:.2f} B/param each), final accuracy "
              f"{report['final_accuracy']}, run {report['run_s']:.1f} s")
    result = {
        "clients": args.clients, "rounds": args.rounds, "fraction": args.fraction,
        "momentum_dtype": args.momentum_dtype, "naive_gb": round(naive / 1e9, 3), "target_peak_rss_gb": 6.0,
    }
    for store, report in reports.items():
        result[store] = {
            "peak_rss_gb": round(report["peak_rss_bytes"] / 1e9, 3),
            "state_gb": round(report["state_bytes"] / 1e9, 3),
            "clients_with_state": report["clients_with_state"],
            "state_bytes_per_param_per_stateful_client": round(report["state_bytes_per_stateful_client"] / params, 3),
            "final_accuracy": report["final_accuracy"], "bytes_up": report["bytes_up"],
            "run_s": round(report["run_s"], 1), "time_per_round_s": round(report["run_s"] / args.rounds, 2),
        }
    if len(reports) == 2:
        result["same_final_accuracy"] = reports["disk"]["final_accuracy"] == reports["memory"]["final_accuracy"]
        result["same_bytes_up"] = reports["disk"]["bytes_up"] == reports["memory"]["bytes_up"]
        result["time_ratio_disk_over_memory"] = round(reports["disk"]["run_s"] / reports["memory"]["run_s"], 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
