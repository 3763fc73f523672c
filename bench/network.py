"""Benchmark: one round's timeline (NetworkModel.run_round) against the raw simpy floor.

The floor is what any per-client simpy model must pay at least: N processes with three timeouts each
(download, compute, upload), run to completion in a fresh Environment, measured in the same run.
Targets: timeline / floor <= 5 at 10,000 clients and <= 50 at 100,000 clients (default scenario:
``lte`` constant links, no deadline, everyone kept). Extra rows (no target) time the other models.

    .venv/bin/python bench/network.py            # prints a table, then one JSON line (last line)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import simpy

from fedgc.network.build import build_network
from fedgc.network.config import NetworkConfig
from fedgc.network.timeline import ClientJob

DOWN_BYTES = 400_000  # a 100k-parameter float32 model
UP_BYTES = 40_000  # a DGC-compressed update
SAMPLES = 320


def floor_seconds(n: int, repeats: int) -> float:
    rng = np.random.default_rng(0)
    delays = rng.uniform(0.1, 10.0, size=(n, 3)).tolist()

    def client(env: simpy.Environment, d: list[float]):
        yield env.timeout(d[0])
        yield env.timeout(d[1])
        yield env.timeout(d[2])

    best = float("inf")
    for _ in range(repeats):
        env = simpy.Environment()
        t0 = time.perf_counter()
        for d in delays:
            env.process(client(env, d))
        env.run()
        best = min(best, time.perf_counter() - t0)
    return best


def timeline_seconds(n: int, repeats: int, config: NetworkConfig, deadline_s: float | None = None,
                     keep_first: int | None = None) -> tuple[float, dict[str, int]]:
    env = simpy.Environment()
    nodes = list(range(n))
    net = build_network(env, config, nodes, np.random.default_rng(0))
    best, counts = float("inf"), {}
    for _ in range(repeats):
        jobs = [ClientJob(node, DOWN_BYTES, SAMPLES, UP_BYTES) for node in net.online_nodes(nodes)]
        t0 = time.perf_counter()
        tl = net.run_round(jobs, deadline_s=deadline_s, keep_first=keep_first)
        best = min(best, time.perf_counter() - t0)
        counts = {s: tl.count(s) for s in ("completed", "late", "cut")}
    return best, counts


def main() -> None:
    shared = Path(os.environ.get("FEDGC_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
    mahimahi = shared / "traces" / "mahimahi"
    rows, result = [], {}
    for n, repeats, target in ((10_000, 5, 5.0), (100_000, 3, 50.0)):
        floor = floor_seconds(n, repeats)
        timeline, counts = timeline_seconds(n, repeats, NetworkConfig())
        ratio = timeline / floor
        tag = f"{n // 1000}k"
        result.update({f"timeline_{tag}_over_floor": round(ratio, 3), f"floor_{tag}_s": round(floor, 4),
                       f"timeline_{tag}_s": round(timeline, 4), f"target_{tag}": target})
        rows.append((f"simpy floor, 3 timeouts x {n}", floor, None, ""))
        rows.append((f"run_round lte constant, {n}", timeline, ratio, f"target <= {target:g}x; {counts}"))
    floor10 = result["floor_10k_s"]
    extras = {
        "spread+jitter+exp. availability+deadline": (
            NetworkConfig(bandwidth_spread=0.7, jitter_ms=20, availability="exponential", device_tier="mixed"),
            {"deadline_s": 5.0}),
        "gilbert_elliott": (NetworkConfig(link="gilbert_elliott"), {}),
        "server fair share 1 Gbit/s both ways": (
            NetworkConfig(bandwidth_spread=0.7, server_up_mbps=1000, server_down_mbps=1000), {}),
        "over-selection keep_first=7000": (NetworkConfig(bandwidth_spread=0.7), {"keep_first": 7000}),
    }
    if (mahimahi / "TMobile-LTE-short.down").is_file():
        extras["mahimahi traces (4 files, up+down)"] = (NetworkConfig(
            link="trace", trace_format="mahimahi", trace_dir=str(mahimahi),
            trace_down=[f"{name}.down" for name in ("ATT-LTE-driving-2016", "TMobile-LTE-short",
                                                     "Verizon-EVDO-driving", "Verizon-LTE-short")],
            trace_up=[f"{name}.up" for name in ("ATT-LTE-driving-2016", "TMobile-LTE-short",
                                                 "Verizon-EVDO-driving", "Verizon-LTE-short")]), {})
    for label, (config, kwargs) in extras.items():
        seconds, counts = timeline_seconds(10_000, 3, config, **kwargs)
        rows.append((f"run_round {label}, 10000", seconds, seconds / floor10, str(counts)))
        key = "extra_" + "".join(c if c.isalnum() else "_" for c in label).strip("_")
        result[key + "_10k_s"] = round(seconds, 4)

    print(f"{'case':58s} {'seconds':>9s} {'x floor':>8s}  notes")
    for label, seconds, ratio, note in rows:
        print(f"{label:58s} {seconds:9.4f} {'' if ratio is None else f'{ratio:8.3f}':>8s}  {note}")
    ok = result["timeline_10k_over_floor"] <= 5.0 and result["timeline_100k_over_floor"] <= 50.0
    result["targets_met"] = ok
    print(json.dumps(result))


if __name__ == "__main__":
    main()
