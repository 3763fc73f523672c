"""Benchmark: a cross-device population of stateful DGC clients, in bounded memory.

``--population`` clients (default 1,000, 3,000 and 10,000) of ``mnist_2nn`` (199,210 parameters) on
real MNIST split Dirichlet(α = 0.5), DGC at 1% density with momentum correction and momentum factor
masking, ``--per-round`` clients per round (default 100), one local step of batch 10, the inline
engine with ``lte`` links, until at least ``--coverage`` (95%) of the population has taken part: the
rounds that takes on average (``ln(1 − coverage) / ln(1 − per_round / population)``, plus 5%), or
``--rounds``. Each population runs in a child process with the disk store (``client_state.store:
disk``); at the smallest population the in-memory store runs too, side by side, for the time ratio.

Each child reports its own peak resident set size (``ru_maxrss``), wall time per round (the round
loop only, not the data loading), how many clients took part (hold state) and the split of the
round's time (``bench/round_split.py``: training, compression, aggregation, network model, state
I/O, wire serialization). Targets (issue 32): peak RSS <= 4 GB whatever the population; time per
round with the disk store within 1.3x of the in-memory store at 1,000 clients.

    .venv/bin/python bench/population.py [--population 1000,3000,10000] [--per-round 100] [--rounds N]
    .venv/bin/python bench/population.py --population 10000 --kill-resume DIR [--rounds 40]

``--kill-resume`` runs each population through the command line twice instead (disk store, a
checkpoint every quarter of the rounds): uninterrupted, and SIGKILLed half-way then resumed; the two
``metrics.jsonl`` must be byte-identical.

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
REPO = Path(__file__).resolve().parents[1]


def rounds_for(population: int, per_round: int, coverage: float) -> int:
    """Rounds after which, on average, ``coverage`` of the population has been selected at least once."""
    if per_round >= population:
        return 1
    return math.ceil(1.05 * math.log(1 - coverage) / math.log(1 - per_round / population))


def scenario(population: int, per_round: int, rounds: int, store: str, root: str) -> dict:
    return {
        "name": "bench-population", "seed": 0, "rounds": rounds,
        "data": {"dataset": "mnist", "root": root, "num_clients": population, "partition": "dirichlet",
                 "alpha": 0.5, "max_test_samples": 1000},
        "model": {"name": "mnist_2nn"},
        "client": {"local_steps": 1, "batch_size": 10, "lr": 0.05},
        "compression": {"name": "dgc", "density": 0.01, "momentum_correction": True, "momentum_masking": True},
        "strategy": {"fraction": per_round / population},
        "network": {"profile": "lte"},
        "eval": {"every": rounds, "batch_size": 500},
        "client_state": {"store": store},
        "checkpoint_every": 0,
    }


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from round_split import RoundSplit

    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.loop import run_rounds
    from fedgc.scenario.model import validate

    sc = validate(scenario(args.population, args.per_round, args.rounds, args.store, args.data_root))
    grid = InlineGrid.for_scenario(sc)  # no run folder: a disk store lives in a temporary folder
    split = RoundSplit(grid)
    t0 = time.perf_counter()
    summary = run_rounds(grid, sc, None)
    wall = time.perf_counter() - t0
    took_part = len(grid.store.clients())
    print(json.dumps({
        "population": args.population, "store": args.store, "rounds": args.rounds,
        "took_part": took_part, "coverage": round(took_part / args.population, 4),
        "state_gb": round(grid.store.nbytes() / 1e9, 3),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9, 3),
        "time_per_round_s": round(wall / args.rounds, 3), "run_s": round(wall, 1),
        "split_per_round_s": split.per_round(args.rounds, wall),
        "final_accuracy": summary.final_accuracy, "bytes_up": summary.bytes_up,
    }))


def run_child(args: argparse.Namespace, population: int, store: str, rounds: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--child", "--population", str(population), "--per-round", str(args.per_round),
           "--rounds", str(rounds), "--store", store, "--data-root", args.data_root]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"child ({population} clients, {store} store) failed with exit code {proc.returncode}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{population:6d} clients, {store:6s} store, {rounds:4d} rounds: {report['coverage']:.1%} took part, "
          f"peak RSS {report['peak_rss_gb']:.2f} GB, {report['time_per_round_s']:.2f} s/round, "
          f"state {report['state_gb']:.2f} GB, accuracy {report['final_accuracy']}", flush=True)
    return report


def kill_and_resume(args: argparse.Namespace, population: int, rounds: int, folder: Path) -> dict:
    """The population's run through the command line (disk store, a checkpoint every ``rounds // 4``
    rounds) twice: once uninterrupted, once SIGKILLed one round past half (past a checkpoint: the
    rounds after it are redone) and then resumed (``--resume``). Their ``metrics.jsonl`` must be
    byte-identical."""
    import signal

    import yaml

    tree = scenario(population, args.per_round, rounds, "disk", args.data_root)
    tree["checkpoint_every"] = max(1, rounds // 4)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(tree))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FEDGC_THREADS": "1"}
    command = [sys.executable, "-m", "fedgc", "run", str(path), "--quiet", "--overwrite", "--out"]
    t0 = time.perf_counter()
    subprocess.run([*command, str(folder / "whole")], env=env, cwd=REPO, check=True, capture_output=True)
    whole_s = time.perf_counter() - t0
    killed = folder / "killed"
    proc = subprocess.Popen([*command, str(killed)], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    metrics = killed / "metrics.jsonl"
    while proc.poll() is None and not (metrics.exists() and len(metrics.read_text().splitlines()) > rounds // 2):
        time.sleep(0.2)
    if proc.poll() is not None:
        raise SystemExit("the run ended before it could be killed")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_after = len(metrics.read_text().splitlines())
    resumed = subprocess.run([sys.executable, "-m", "fedgc", "run", "--resume", str(killed), "--quiet"], env=env,
                             cwd=REPO, check=False, capture_output=True, text=True)
    if resumed.returncode != 0:
        raise SystemExit(f"--resume failed: {resumed.stderr.strip()[-500:]}")
    same = metrics.read_bytes() == (folder / "whole" / "metrics.jsonl").read_bytes()
    report = {"population": population, "rounds": rounds, "checkpoint_every": tree["checkpoint_every"],
              "killed_after_rounds": killed_after, "resumed_metrics_identical": same, "whole_run_s": round(whole_s, 1)}
    print(f"{population:6d} clients, {rounds} rounds: SIGKILL after {killed_after} rounds, resumed: metrics "
          f"{'byte-identical' if same else 'DIFFERENT'} to the uninterrupted run", flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", default="1000,3000,10000", help="comma-separated population sizes")
    parser.add_argument("--per-round", type=int, default=100)
    parser.add_argument("--coverage", type=float, default=0.95)
    parser.add_argument("--rounds", type=int, default=None, help="rounds per population (default: until coverage)")
    parser.add_argument("--store", choices=["disk", "memory"], default="disk", help=argparse.SUPPRESS)
    parser.add_argument("--no-memory-baseline", action="store_true",
                        help="skip the in-memory run at the smallest population")
    parser.add_argument("--data-root", default=str(REPO.parent / "shared" / "data" / "mnist"))
    parser.add_argument("--kill-resume", metavar="DIR", default=None,
                        help="instead: for each population, kill a run (--rounds, default 40) half-way and resume it "
                             "in DIR, and compare its metrics with an uninterrupted run's")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.population = int(args.population)
        child(args)
        return
    if args.kill_resume:
        checks = [kill_and_resume(args, int(p), args.rounds or 40, Path(args.kill_resume) / p)
                  for p in args.population.split(",")]
        print(json.dumps({"kill_resume": checks, "all_identical": all(c["resumed_metrics_identical"] for c in checks)}))
        return

    populations = sorted(int(p) for p in args.population.split(","))
    runs = []
    for population in populations:
        rounds = args.rounds or rounds_for(population, args.per_round, args.coverage)
        runs.append(run_child(args, population, "disk", rounds))
        if population == populations[0] and not args.no_memory_baseline:
            runs.append(run_child(args, population, "memory", rounds))
    disk = [r for r in runs if r["store"] == "disk"]
    result = {"per_round": args.per_round, "coverage_target": args.coverage, "runs": runs,
              "max_peak_rss_gb_disk": max(r["peak_rss_gb"] for r in disk), "target_peak_rss_gb": 4.0}
    memory = [r for r in runs if r["store"] == "memory"]
    if memory:
        base = next(r for r in disk if r["population"] == memory[0]["population"])
        result["time_ratio_disk_over_memory"] = round(base["time_per_round_s"] / memory[0]["time_per_round_s"], 3)
        result["same_final_accuracy"] = base["final_accuracy"] == memory[0]["final_accuracy"]
        result["target_time_ratio"] = 1.3
    print(json.dumps(result))


if __name__ == "__main__":
    main()
