"""Federated Shakespeare on phones: dense FedAvg vs DGC (with and without clipping) vs top-k, with and
without compressed downloads, on an LTE and a 3G trace, over seeds.

    .venv/bin/python bench/shakespeare_federated.py [--seeds 0,1,2] [--rounds N] [--jobs 1]
        [--out runs/bench-shakespeare_lstm] [--partial] [--write]

Trains ``scenarios/shakespeare_lstm.yaml`` (natural split by speaking role, ``char_lstm``, the LTE
mahimahi traces) once per method (``METHODS``: upload compressor x download) and seed with
``python -m fedgc run --set ...``. The scenario has no availability churn, deadline or
over-selection, so every selected client completes and the network only moves the simulated clock:
the training is the same on any trace (the network model draws from its own generator). The 3G clock
is therefore *replayed*, not trained again: each run's ``clients.jsonl`` (per round and client: bytes
down, compute seconds, bytes up) is fed round by round to fedgc's own network model
(``fedgc.network.build.build_network`` + ``NetworkModel.run_round``) built from the 3G network section
(``NETWORKS['3g']``: the Norway HSDPA traces of ``scenarios/mnist_3g_dropouts.yaml``) with the generator
the simulator would have used (``default_rng(default_rng(seed).integers(2**63))``). The same replay on
the LTE section reproduces the LTE run's own clock, which the bench checks (``lte_replay_max_rel_error``).

Reads each run's ``summary.json`` / ``metrics.jsonl`` / ``clients.jsonl`` and prints one JSON object
on its last line: per method, mean and sample std over seeds of the final next-character accuracy,
test loss and perplexity, bytes up and down, the upload wire ratio after the warm-up, and per
network the simulated time to the target accuracy. With ``--write`` it writes its table between the
``<!-- shakespeare-federated:begin -->`` / ``end`` markers of ``docs/results.md`` and the plot
``docs/img/shakespeare_federated_accuracy.png``. Resumable: a finished run folder is reused
(``--rerun`` runs it again); ``--partial`` runs nothing and reports what exists.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_block import write_block

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "shakespeare_lstm.yaml"
BEGIN, END = "<!-- shakespeare-federated:begin -->", "<!-- shakespeare-federated:end -->"
PLOT_REL = "img/shakespeare_federated_accuracy.png"

DOWN = ["downlink.name=topk", "downlink.density=0.03"]
# Upload compressor x download, and DGC without its warm-up.
METHODS: dict[str, list[str]] = {
    "dense": ["compression.name=none"],
    "dgc": [],
    "dgc_no_clipping": ["compression.clip_norm=null"],
    "dgc_no_warmup": ["compression.warmup_rounds=0"],
    "topk": ["compression.name=topk"],
    "dense+down": ["compression.name=none", *DOWN],
    "dgc+down": [*DOWN],
    "dgc_no_clipping+down": ["compression.clip_norm=null", *DOWN],
    "topk+down": ["compression.name=topk", *DOWN],
}
LABELS = {
    "dense": "dense FedAvg, fp32 both ways",
    "dgc": "DGC up 0.01 (clipped), dense down",
    "dgc_no_clipping": "DGC up 0.01, no clipping, dense down",
    "dgc_no_warmup": "DGC up 0.01 (clipped) from round 1, no warm-up, dense down",
    "topk": "top-k up 0.01, dense down",
    "dense+down": "dense up, top-k down 0.03",
    "dgc+down": "DGC up 0.01 (clipped), top-k down 0.03",
    "dgc_no_clipping+down": "DGC up 0.01, no clipping, top-k down 0.03",
    "topk+down": "top-k up 0.01, top-k down 0.03",
}
# The 3G network section: scenarios/mnist_3g_dropouts.yaml's links (Norway HSDPA, downlink traces,
# uplink = downlink x the 3g profile's up/down ratio), with this scenario's device.
NORWAY = ["norway_bus_1", "norway_car_2", "norway_train_1", "norway_tram_10", "norway_metro_2",
          "norway_ferry_2", "norway_bus_10", "norway_car_3", "norway_train_12", "norway_tram_11"]
NETWORKS = ("lte", "3g")


def shared_dir() -> Path:
    return Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared")).resolve()


def network_section(net: str, lte_section: dict) -> dict:
    """The scenario's network section for ``net`` (``lte``: as written)."""
    if net == "lte":
        return dict(lte_section)
    return {**lte_section, "profile": "3g", "trace_dir": str(shared_dir() / "traces" / "pensieve" / "norway_hsdpa_cooked_3gp"),
            "link": {"name": "trace", "format": "pensieve", "down": list(NORWAY)}}


def run_one(run_dir: Path, sets: list[str], rounds: int, rerun: bool, partial: bool) -> None:
    summary_path = run_dir / "summary.json"
    done = summary_path.is_file() and json.loads(summary_path.read_text()).get("rounds") == rounds
    if partial or (done and not rerun):
        return
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "fedgc.cli.run", str(SCENARIO), "--out", str(run_dir), "--overwrite", "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    src = os.environ.get("FEDGC_SRC")  # run another copy of fedgc (e.g. a snapshot of a commit)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    start, cpu0 = time.time(), os.times()
    with open(run_dir.with_suffix(".log"), "w") as log:
        rc = subprocess.run(cmd, check=False, cwd=src or REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    cpu1 = os.times()
    cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    (run_dir.with_suffix(".cpu")).write_text(f"{cpu:.1f}\n")
    print(f"{run_dir}: rc={rc} in {time.time() - start:.0f}s wall, {cpu:.0f}s CPU", file=sys.stderr, flush=True)


def base_sets() -> list[str]:
    return [f"data.root={shared_dir() / 'data' / 'leaf-shakespeare'}",
            f"network.trace_dir={shared_dir() / 'traces' / 'mahimahi'}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default=str(REPO / "runs" / "bench-shakespeare_lstm"))
    parser.add_argument("--rounds", type=int, help="override the scenario's rounds")
    parser.add_argument("--only", nargs="*", help="only these methods")
    parser.add_argument("--rerun", action="store_true")
    parser.add_argument("--partial", action="store_true", help="run nothing; report the runs so far")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--results", default=str(REPO / "docs" / "results.md"))
    parser.add_argument("--targets", type=float, nargs="*", help="accuracy targets besides the scenario's")
    args = parser.parse_args(argv)
    os.environ.setdefault("FEDGC_DATA_DIR", str(shared_dir() / "data"))
    os.environ.setdefault("FEDGC_TRACE_DIR", str(shared_dir() / "traces"))
    from fedgc.scenario.model import load_tree, validate

    tree = load_tree(SCENARIO)
    if args.rounds:
        tree["rounds"] = args.rounds
    rounds = validate(tree).rounds
    seeds = [int(s) for s in args.seeds.split(",")]
    methods = {k: v for k, v in METHODS.items() if not args.only or k in args.only}
    out = Path(args.out)
    extra = [*base_sets(), *([f"rounds={args.rounds}"] if args.rounds else [])]
    for seed in seeds:  # seed-major: a bench cut short has whole seeds
        for name, sets in methods.items():
            run_one(out / f"seed{seed}" / name, [*extra, f"seed={seed}", *sets], rounds, args.rerun, args.partial)
    return report(out, seeds, methods, tree, rounds, args)


def read_run(run_dir: Path) -> tuple[list[dict], list[dict], dict | None]:
    """(metrics rows, client rows, summary or None) of one run folder; ([], [], None) when absent."""
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        return [], [], None
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    clients_path = run_dir / "clients.jsonl"
    clients = [json.loads(line) for line in clients_path.read_text().splitlines() if line.strip()] \
        if clients_path.is_file() else []
    summary_path = run_dir / "summary.json"
    return rows, clients, json.loads(summary_path.read_text()) if summary_path.is_file() else None


def replay_clock(tree: dict, seed: int, network: dict, clients: list[dict]) -> dict[int, float]:
    """Round → simulated end time (s) of the run whose ``clients.jsonl`` rows are ``clients``, on
    ``network`` (a scenario network section), through fedgc's own network model. Every client of a
    row downloads its recorded bytes, computes the round's asked samples and uploads its recorded
    bytes, as ``SimulatedExchange`` charges them."""
    import copy

    import numpy as np
    import simpy

    from fedgc.network.build import build_network
    from fedgc.network.timeline import ClientJob
    from fedgc.scenario.model import validate

    t = copy.deepcopy(tree)
    t["network"], t["seed"] = network, seed
    scenario = validate(t)
    if scenario.network.deadline_s is not None or scenario.network.over_selection > 1.0:
        raise ValueError("replay_clock: only for scenarios without deadline or over-selection")
    nodes = list(range(1, scenario.data.num_clients + 1))  # the inline grid's node ids
    rng = np.random.default_rng(scenario.seed)
    model = build_network(simpy.Environment(), scenario.network, nodes, np.random.default_rng(rng.integers(2**63)))
    samples = scenario.client.local_steps * scenario.client.batch_size
    by_round: dict[tuple[int, int], list[dict]] = {}
    for c in clients:
        by_round.setdefault((c["round"], c["attempt"]), []).append(c)
    ends: dict[int, float] = {}
    for (rnd, _attempt), rows in sorted(by_round.items()):
        jobs = [ClientJob(node_id=c["node"], down_bytes=int(c["bytes_down"]), compute_samples=samples,
                          up_bytes=int(c["bytes_up"])) for c in sorted(rows, key=lambda c: c["node"])]
        ends[rnd] = model.run_round(jobs).end
    return ends


def time_to(curve: list[tuple[float, float]], target: float) -> float | None:
    """The first simulated time at which the (time, accuracy) curve reaches ``target``; None if never."""
    return next((t for t, a in curve if a >= target), None)


def summarize(rows: list[dict], summary: dict | None, clocks: dict[str, dict[int, float]], rounds: int,
              warmup: int, targets: list[float]) -> dict:
    """One run's figures. ``clocks``: per network, round → simulated end time."""
    evals = [(r["round"], r["accuracy"], r["loss"]) for r in rows if r.get("accuracy") is not None]
    last = evals[-1][0]
    rows = [r for r in rows if r["round"] <= last]
    steady = [r for r in rows if r["round"] > warmup]
    out = {
        "final_accuracy": evals[-1][1],
        "final_loss": evals[-1][2],
        "perplexity": math.exp(evals[-1][2]) if evals[-1][2] < 700 else float("inf"),
        "best_accuracy": max(a for _, a, _ in evals),
        "bytes_up": sum(r["bytes_up"] for r in rows),
        "bytes_down": sum(r["bytes_down"] for r in rows),
        "ratio_up_after_warmup": sum(r["dense_bytes_up"] for r in steady) / max(1, sum(r["bytes_up"] for r in steady)),
        "ratio_up": sum(r["dense_bytes_up"] for r in rows) / max(1, sum(r["bytes_up"] for r in rows)),
        "nonfinite_train_loss": sum(1 for r in rows if r.get("train_loss") is not None
                                    and not math.isfinite(r["train_loss"])),
        "max_train_loss": max((r["train_loss"] for r in rows[max(1, rounds // 10):] if r.get("train_loss") is not None),
                              default=None),
        "rounds": last,
        "partial": summary is None or last < rounds,
        "wall_time_s": summary["wall_time_s"] if summary else None,
        "accuracy_curve": [(rnd, a) for rnd, a, _ in evals],
        "train_loss_curve": [r.get("train_loss") for r in rows],
    }
    for net, clock in clocks.items():
        curve = [(clock[rnd], a) for rnd, a, _ in evals if rnd in clock]
        out[f"time_curve_{net}"] = curve
        out[f"sim_time_s_{net}"] = clock.get(last)
        for target in targets:
            out[f"time_to_{target:g}_{net}"] = time_to(curve, target)
            out[f"round_to_{target:g}"] = next((rnd for rnd, a, _ in evals if a >= target), None)
    return out


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    values = [float(v) for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def stat_keys(targets: list[float]) -> list[str]:
    keys = ["final_accuracy", "final_loss", "perplexity", "best_accuracy", "bytes_up", "bytes_down",
            "ratio_up_after_warmup", "ratio_up", "max_train_loss", "wall_time_s"]
    for net in NETWORKS:
        keys.append(f"sim_time_s_{net}")
        keys += [f"time_to_{t:g}_{net}" for t in targets]
    keys += [f"round_to_{t:g}" for t in targets]
    return keys


def aggregate(per_seed: dict[int, dict], targets: list[float]) -> dict:
    """Per-seed figures of one method → means, sample stds, and how many seeds reached each target."""
    out: dict = {"n": len(per_seed), "seeds": sorted(per_seed),
                 "partial": any(r["partial"] for r in per_seed.values()),
                 "rounds": min(r["rounds"] for r in per_seed.values())}
    for key in stat_keys(targets):
        out[key], out[f"{key}_std"] = mean_std([r.get(key) for r in per_seed.values()])
        if key.startswith(("time_to_", "round_to_")):
            out[f"{key}_reached"] = sum(1 for r in per_seed.values() if r.get(key) is not None)
    out["nonfinite_train_loss"] = sum(r["nonfinite_train_loss"] for r in per_seed.values())
    curves = [dict(r["accuracy_curve"]) for r in per_seed.values()]
    common = sorted(set.intersection(*(set(c) for c in curves)))
    out["accuracy_curve"] = [(rnd, statistics.fmean(c[rnd] for c in curves)) for rnd in common]
    return out


def _strict(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def figures(results: dict[str, dict], targets: list[float], checks: dict) -> dict:
    """The last line's JSON: per-method means and stds (no curves), and the replay check."""
    out: dict = {"targets": targets, **checks, "methods": {}}
    for name, r in results.items():
        out["methods"][name] = {k: v for k, v in r.items() if k != "accuracy_curve"}
    return _strict(out)


def _f(mean, std, n, scale=1.0, digits=2, unit=""):
    if mean is None or not math.isfinite(mean):
        return "–"
    return f"{scale * mean:.{digits}f}{unit}" + (f" ± {scale * std:.{digits}f}" if n > 1 else "")


def render(results: dict[str, dict], scenario: dict, targets: list[float], checks: dict, plot: str | None) -> str:
    """The block for docs/results.md (pure: from the aggregated figures)."""
    c, cl, s = scenario["compression"], scenario["client"], scenario["strategy"]
    seeds = sorted({x for r in results.values() for x in r["seeds"]})
    dense = results.get("dense")
    per_round = max(1, round(s["fraction"] * scenario["data"]["num_clients"]))
    lines = [
        BEGIN,
        "## Federated Shakespeare on phones: dense FedAvg vs DGC vs top-k, LTE and 3G (`shakespeare_lstm`)",
        "",
        (f"`bench/shakespeare_federated.py`: LEAF Shakespeare split by speaking role ({scenario['data']['num_clients']} "
         f"clients), `{scenario['model']['name']}`, {per_round} clients a round, {cl['local_steps']} local steps of batch "
         f"{cl['batch_size']} (lr {cl['lr']}, local momentum {cl['momentum']}), FedAvg weighting, server lr "
         f"{s['server_lr']}, {scenario['rounds']} rounds; seeds {', '.join(map(str, seeds))}; test: the first "
         f"{scenario['data']['max_test_samples']} test samples every {scenario['eval']['every']} rounds. DGC: density "
         f"{c['density']}, no momentum correction (federated mode), clip_norm {c['clip_norm']} (update units, "
         f"×N^-1/2 per client), warm-up {c['warmup_rounds']} rounds; top-k: density {c['density']} with error "
         "feedback, no warm-up; `+down`: top-k model-difference downloads at density 0.03 (docs/downlink.md). "
         "LTE: the scenario's mahimahi traces (trained); 3G: Norway HSDPA traces, the same runs' clock replayed "
         f"on fedgc's network model (LTE replay of the LTE runs: max relative error "
         f"{checks.get('lte_replay_max_rel_error', float('nan')):.2e} over every round)."),
        "",
        ("Mean ± sample std over the seeds (n). *acc.*: next-character accuracy after the last round; *ppl*: "
         "exp(test cross-entropy); *MB up / down*: wire bytes over the run (Flower messages, all clients); *ratio up*: "
         "dense fp32 reply bytes / actual, after the warm-up; *to X%*: simulated minutes until the first evaluation "
         "at or above X% (mean over the seeds that reached it, k/n reached); *sim. min*: the whole run."),
        "",
    ]
    head = "| method | n | acc. % | Δ vs dense (pp) | loss | ppl | MB up | MB down | ratio up |"
    sep = "|---|---|---|---|---|---|---|---|---|"
    for net in NETWORKS:
        for t in targets:
            head += f" {net.upper()}: to {100 * t:g}% (min) |"
            sep += "---|"
        head += f" {net.upper()}: sim. min |"
        sep += "---|"
    lines += [head, sep]
    for name, r in results.items():
        n = r["n"]
        delta = "–" if dense is None else f"{100 * (r['final_accuracy'] - dense['final_accuracy']):+.2f}"
        row = (f"| `{name}`{' (partial)' if r['partial'] else ''} | {n} "
               f"| {_f(r['final_accuracy'], r['final_accuracy_std'], n, 100)} "
               f"| {delta} | {_f(r['final_loss'], r['final_loss_std'], n, 1, 3)} | {_f(r['perplexity'], r['perplexity_std'], n)} "
               f"| {_f(r['bytes_up'], r['bytes_up_std'], n, 1e-6, 1)} | {_f(r['bytes_down'], r['bytes_down_std'], n, 1e-6, 1)} "
               f"| {_f(r['ratio_up_after_warmup'], 0, 1, 1, 1)}× |")
        for net in NETWORKS:
            for t in targets:
                k = f"time_to_{t:g}_{net}"
                reached = r[f"{k}_reached"]
                row += f" {_f(r[k], r[f'{k}_std'], reached, 1 / 60, 1)} ({reached}/{n}) |"
            row += f" {_f(r[f'sim_time_s_{net}'], r[f'sim_time_s_{net}_std'], n, 1 / 60, 1)} |"
        lines.append(row)
    lines += ["", "Methods (`--set` on top of the scenario and `seed=S`):", ""]
    for name in results:
        lines.append(f"* `{name}` ({LABELS[name]}): " + (" ".join(f"`{x}`" for x in METHODS[name]) or "the scenario as written"))
    if plot:
        lines += ["", f"![accuracy vs round and vs simulated time]({plot})"]
    lines += ["", "Accuracy, mean over seeds (round: %):", ""]
    for name, r in results.items():
        lines.append(f"* `{name}`: " + ", ".join(f"{rnd}: {100 * a:.1f}" for rnd, a in r["accuracy_curve"]))
    lines.append(END)
    return "\n".join(lines)


def write_plot(results: dict[str, dict], per_run: dict[str, dict[int, dict]], path: Path, targets: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for i, name in enumerate(results):
        color = f"C{i}"
        style = "--" if name.endswith("+down") else "-"
        r = results[name]
        if r["accuracy_curve"]:
            xs, ys = zip(*r["accuracy_curve"])
            axes[0].plot(xs, [100 * y for y in ys], style, color=color, marker=".", label=f"{name} (n={r['n']})")
        for j, net in enumerate(NETWORKS, start=1):
            for k, run in enumerate(per_run[name].values()):
                curve = run.get(f"time_curve_{net}") or []
                if curve:
                    xs, ys = zip(*curve)
                    axes[j].plot([x / 60 for x in xs], [100 * y for y in ys], style, color=color, alpha=0.6,
                                 linewidth=1, label=name if k == 0 else None)
    axes[0].set_xlabel("round")
    axes[0].set_title("mean over seeds", fontsize=9)
    for j, net in enumerate(NETWORKS, start=1):
        axes[j].set_xlabel(f"simulated minutes ({net.upper()})")
        axes[j].set_title(f"{net.upper()}: every seed", fontsize=9)
    for ax in axes:
        ax.set_ylabel("test next-character accuracy %")
        for t in targets:
            ax.axhline(100 * t, color="grey", linewidth=0.7, linestyle=":")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def report(out: Path, seeds: list[int], methods: dict, tree: dict, rounds: int, args) -> int:
    from fedgc.scenario.model import validate

    scenario = validate(tree).model_dump(mode="json")
    targets = sorted({scenario["eval"]["target_accuracy"], *(args.targets or [])})
    warmup = scenario["compression"]["warmup_rounds"]
    per_run: dict[str, dict[int, dict]] = {m: {} for m in methods}
    max_err = 0.0
    for seed in seeds:
        for name in methods:
            rows, clients, summary = read_run(out / f"seed{seed}" / name)
            if not any(r.get("accuracy") is not None for r in rows):
                continue
            clocks = {net: replay_clock(tree, seed, network_section(net, tree["network"]), clients) for net in NETWORKS}
            for r in rows:  # the LTE replay against the run's own clock
                if r["round"] in clocks["lte"]:
                    max_err = max(max_err, abs(clocks["lte"][r["round"]] - r["sim_end_s"]) / max(1e-9, r["sim_end_s"]))
            clocks["lte"] = {r["round"]: r["sim_end_s"] for r in rows}  # the trained run's own clock
            per_run[name][seed] = summarize(rows, summary, clocks, rounds, warmup, targets)
    results = {m: aggregate(runs, targets) for m, runs in per_run.items() if runs}
    checks = {"lte_replay_max_rel_error": max_err, "rounds": rounds, "seeds": seeds}
    if args.write:
        results_path = Path(args.results)
        write_plot(results, per_run, results_path.parent / PLOT_REL, targets)
        write_block(results_path, BEGIN, END, render(results, scenario, targets, checks, PLOT_REL))
    print(json.dumps(figures(results, targets, checks), allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
