"""Time DGC's sampled top-k selection against one threshold pass and an exact torch.topk.

On a 25.5M-element fp32 tensor (ResNet-50's size, as in the DGC paper) at density 0.001:
  (a) dgc_select: ``sampled_topk_indices`` (sampled threshold, no top-k over the full tensor)
  (b) pass:       one ``x.abs() >= thr`` over the same tensor
  (b') pass_nonzero: the same pass and the ``nonzero`` that turns it into indices (what a selection
                  by threshold costs at least; the GPU target's baseline)
  (c) topk:       ``torch.topk(x.abs(), k)``
Each is timed in the same run, interleaved, median of ``--reps`` (``--device cuda``: the tensor on the
GPU, each timing synchronised; the client's generator stays on the CPU, as in fedgc). The last line
printed is one JSON object: ``dgc_select_over_pass`` (a/b, CPU target <= 1.5),
``dgc_select_over_pass_nonzero`` (a/b', GPU target <= 1.5), ``topk_over_dgc_select`` (c/a, target >= 3)
and the raw median times in milliseconds.

    python bench/dgc_select.py [--numel 25500000] [--density 0.001] [--reps 9] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import torch

from fedgc.compress.dgc import sampled_topk_indices
from fedgc.execution.device import resolve_device, synchronize


def timed(fn, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numel", type=int, default=25_500_000)
    parser.add_argument("--density", type=float, default=0.001)
    parser.add_argument("--sample-ratio", type=float, default=0.01)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N | auto")
    args = parser.parse_args()
    device = resolve_device(args.device)

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    torch.set_num_threads(threads)
    x = torch.randn(args.numel, generator=torch.Generator().manual_seed(0)).to(device)
    k = math.ceil(args.density * args.numel)
    threshold = float(torch.topk(x.abs(), k).values[-1])  # the exact k-th magnitude, for (b)
    generator = torch.Generator().manual_seed(1)

    cases = {
        "dgc_select": lambda: sampled_topk_indices(x, k, args.sample_ratio, generator),
        "pass": lambda: x.abs() >= threshold,
        "pass_nonzero": lambda: (x.abs() >= threshold).nonzero(),
        "topk": lambda: torch.topk(x.abs(), k, sorted=False),
    }
    for fn in cases.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.reps):
        for name, fn in cases.items():
            times[name].append(timed(fn, device))
    median = {name: statistics.median(ts) for name, ts in times.items()}
    selected, passes = sampled_topk_indices(x, k, args.sample_ratio, torch.Generator().manual_seed(2))

    print(
        f"numel={args.numel:,} density={args.density} k={k:,} sample_ratio={args.sample_ratio} "
        f"threads={threads} device={device} torch={torch.__version__}"
    )
    print(
        f"dgc_select picked {selected.numel():,} entries ({selected.numel() / k:.3f}·k) in {passes} threshold pass(es)"
    )
    print(f"{'method':<12}{'median ms':>12}{'min ms':>10}{'max ms':>10}")
    for name, ts in times.items():
        print(f"{name:<12}{median[name]:>12.2f}{min(ts):>10.2f}{max(ts):>10.2f}")
    result = {
        "dgc_select_over_pass": round(median["dgc_select"] / median["pass"], 3),
        "dgc_select_over_pass_nonzero": round(median["dgc_select"] / median["pass_nonzero"], 3),
        "topk_over_dgc_select": round(median["topk"] / median["dgc_select"], 2),
        "dgc_select_ms": round(median["dgc_select"], 2),
        "pass_ms": round(median["pass"], 2),
        "pass_nonzero_ms": round(median["pass_nonzero"], 2),
        "topk_ms": round(median["topk"], 2),
        "numel": args.numel,
        "density": args.density,
        "threads": threads,
        "device": str(device),
        "reps": args.reps,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
