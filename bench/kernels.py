"""What the portable CPU kernels cost: the same commands under FEDGC_CPU_KERNELS=portable and =native.

Each workload is a real ``python -m fedgc run`` in a fresh process (the kernels are chosen when torch
first computes, once a process), the two kernel sets interleaved ``--reps`` times; the figure kept for
each is the fastest (the machine is shared: the minimum is the least disturbed). Workloads:

- ``quickstart``: ``scenarios/quickstart.yaml`` as shipped (40 rounds, ``small_cnn`` on digits, DGC);
  the whole command's wall time and the rounds' (``summary.json``'s ``wall_time_s``).
- ``mnist_cnn``: one round of ``scenarios/fedavg_mnist_cnn.yaml`` (10 clients, 1 local epoch each,
  DGC 1% uploads, evaluated once) on MNIST from ``$FEDGC_DATA_DIR/mnist``; skipped without it.

Also reported: whether the two kernel sets gave the same ``metrics.jsonl`` (on a CPU with AVX-512 they
should not; on an AVX2-only CPU they are the same kernels). Last line: one JSON object.

    .venv/bin/python bench/kernels.py [--reps 2] [--quickstart-rounds 40]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_CBWR",
                    "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_CORETYPE", "FEDGC_CPU_KERNELS")


def workloads(quickstart_rounds: int) -> dict[str, list[str]]:
    chosen = {"quickstart": ["scenarios/quickstart.yaml", "--set", f"rounds={quickstart_rounds}"]}
    mnist = Path(os.environ.get("FEDGC_DATA_DIR", REPO.parent / "shared" / "data")) / "mnist"
    if mnist.is_dir():
        chosen["mnist_cnn"] = ["scenarios/fedavg_mnist_cnn.yaml", "--set", "rounds=1", "--set", "client.epochs=1",
                               "--set", "compression.name=dgc", "--set", "compression.density=0.01",
                               "--set", "compression.error_feedback=true"]
    else:
        print(f"mnist_cnn skipped: no MNIST at {mnist} (set FEDGC_DATA_DIR)", file=sys.stderr)
    return chosen


def run_once(args: list[str], kernels: str, out: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES} | {"FEDGC_CPU_KERNELS": kernels}
    env.setdefault("FEDGC_DATA_DIR", str(REPO.parent / "shared" / "data"))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "fedgc", "run", *args, "--quiet", "--out", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=3600, check=False)
    command_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{kernels} run failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"command_s": round(command_s, 2), "rounds_s": round(summary["wall_time_s"], 2),
            "round_s": round(summary["wall_time_s"] / max(1, summary["rounds"]), 3),
            "metrics": (out / "metrics.jsonl").read_bytes()}


def machine() -> dict[str, Any]:
    code = ("import json, torch; print(json.dumps({'native': torch.backends.cpu.get_cpu_capability(), "
            "'torch': torch.__version__, 'threads': torch.get_num_threads()}))")
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    facts: dict[str, Any] = json.loads(done.stdout)
    try:
        facts["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                         text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        facts["commit"] = None
    facts["fedgc_threads"] = os.environ.get("FEDGC_THREADS", "1")
    return facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2, help="runs of each workload under each kernel set (1-10)")
    parser.add_argument("--quickstart-rounds", type=int, default=40, help="rounds of the quickstart (1-1000)")
    options = parser.parse_args()
    if not 1 <= options.reps <= 10 or not 1 <= options.quickstart_rounds <= 1000:
        parser.error("--reps must be 1-10 and --quickstart-rounds 1-1000")
    result: dict[str, Any] = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "reps": options.reps, "workloads": {}}
    with tempfile.TemporaryDirectory(prefix="fedgc-kernels-") as scratch:
        for name, args in workloads(options.quickstart_rounds).items():
            runs: dict[str, list[dict[str, Any]]] = {"portable": [], "native": []}
            for rep in range(options.reps):
                for kernels in ("portable", "native"):
                    runs[kernels].append(run_once(args, kernels, Path(scratch) / f"{name}-{kernels}-{rep}"))
            best = {k: {f: min(r[f] for r in v) for f in ("command_s", "rounds_s", "round_s")} for k, v in runs.items()}
            result["workloads"][name] = {
                **best,
                "portable_over_native_rounds": round(best["portable"]["rounds_s"] / best["native"]["rounds_s"], 3),
                "portable_over_native_command": round(best["portable"]["command_s"] / best["native"]["command_s"], 3),
                "same_metrics_across_kernel_sets": runs["portable"][0]["metrics"] == runs["native"][0]["metrics"],
                "each_set_reproduces_itself": all(len({r["metrics"] for r in v}) == 1 for v in runs.values()),
            }
            row = result["workloads"][name]
            print(f"{name}: rounds {best['portable']['rounds_s']} s portable vs {best['native']['rounds_s']} s native "
                  f"(x{row['portable_over_native_rounds']}); command {best['portable']['command_s']} vs "
                  f"{best['native']['command_s']} s; same metrics: {row['same_metrics_across_kernel_sets']}",
                  file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
