"""Simulated time to target accuracy on mobile networks: dense FedAvg vs DGC, LTE and 3G.

    .venv/bin/python bench/mobile_time_to_target.py [--rounds N] [--jobs 1] [--out runs/bench-mobile] [--reuse] [--write]

Runs ``scenarios/mnist_lte_dropouts.yaml`` and ``scenarios/mnist_3g_dropouts.yaml`` five times
each (``METHODS``): dense FedAvg (``--set compression.name=none``, same everything else); DGC uploads
at density 0.01 (as written) and 0.1 with the dense model downloaded; and DGC uploads with compressed
downloads (``downlink``, docs/downlink.md) at 0.03 and 0.1 both ways. Reads ``summary.json`` /
``metrics.jsonl``; with ``--write``, writes the table, the per-phase breakdown with the speed-up bounds
and an accuracy-vs-simulated-time plot (``docs/img/mobile_time_to_target.png``) into ``docs/results.md``
(between the ``mobile`` markers); prints the figures as one JSON object on its last line.

The bounds, from the mean phase times of the kept clients: a round cannot get shorter than the
method's download + compute, so per round the best a method can do against dense is
(d + c + u_dense) / (d′ + c′) (d′, c′: its own download, dense or compressed, and compute); and no
compression can make it shorter than the compute alone, (d + c + u_dense) / c′.

Paths to the shared data and traces come from ``$FEDGC_SHARED_DIR`` (default ``../shared`` next to
the repository) and are passed as ``--set`` overrides, so the bench runs from any directory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from results_block import write_block  # bench/ is on sys.path when a bench runs

REPO = Path(__file__).resolve().parents[1]
NETWORKS = {
    "lte": ("mnist_lte_dropouts.yaml", "traces/mahimahi"),
    "3g": ("mnist_3g_dropouts.yaml", "traces/pensieve/norway_hsdpa_cooked_3gp"),
}
# dense FedAvg; DGC uploads as the scenarios write them (density 0.01) and at density 0.1, with the
# dense model downloaded; then DGC uploads with compressed downloads (top-k model differences,
# docs/downlink.md) at density 0.03 both ways (the best point of a 3×3 grid of densities at seed 0,
# docs/results.md) and at 0.1 both ways.
DOWN = ["downlink.name=topk"]
METHODS = {
    "dense": ["compression.name=none"],
    "dgc": [],
    "dgc_d0.1": ["compression.density=0.1"],
    "dgc_d0.03+down0.03": ["compression.density=0.03", *DOWN, "downlink.density=0.03"],
    "dgc_d0.1+down0.1": ["compression.density=0.1", *DOWN, "downlink.density=0.1"],
}
LABELS = {
    "dense": "dense FedAvg (fp32 both ways)",
    "dgc": "DGC upload 0.01, dense download",
    "dgc_d0.1": "DGC upload 0.1, dense download",
    "dgc_d0.03+down0.03": "DGC upload 0.03, top-k download 0.03",
    "dgc_d0.1+down0.1": "DGC upload 0.1, top-k download 0.1",
}
SECOND_TARGET = 0.93  # a second, stricter threshold read off the same accuracy curves
BEGIN, END = "<!-- mobile:begin -->", "<!-- mobile:end -->"
PLOT = REPO / "docs" / "img" / "mobile_time_to_target.png"


def shared_dir() -> Path:
    return Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared")).resolve()


GRID = (0.01, 0.03, 0.1)  # --grid: every (upload, download) density pair, DGC up and top-k down
GRID_BEGIN, GRID_END = "<!-- mobile-grid:begin -->", "<!-- mobile-grid:end -->"


def grid_methods() -> dict[str, list[str]]:
    methods = {"dense": METHODS["dense"]}
    for up in GRID:
        for down in GRID:
            methods[f"up{up}-down{down}"] = [f"compression.density={up}", *DOWN, f"downlink.density={down}"]
    return methods


def run_one(net: str, method: str, out: Path, extra: list[str], reuse: bool,
            methods: dict[str, list[str]] = METHODS) -> dict:
    scenario_file, trace_dir = NETWORKS[net]
    run_dir = out / f"{net}-{method}"
    sets = [
        f"data.root={shared_dir() / 'data' / 'mnist'}",
        f"network.trace_dir={shared_dir() / trace_dir}",
        *extra,
        *methods[method],
    ]
    if not (reuse and (run_dir / "summary.json").is_file()):
        cmd = [
            sys.executable,
            "-m",
            "fedgc.cli.run",
            str(REPO / "scenarios" / scenario_file),
            "--out",
            str(run_dir),
            "--overwrite",
            "--quiet",
        ]
        for s in sets:
            cmd += ["--set", s]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        start = time.time()
        with open(out / f"{net}-{method}.log", "w") as log:
            rc = subprocess.run(cmd, check=False, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        print(f"{net}-{method}: rc={rc} in {time.time() - start:.0f}s", file=sys.stderr, flush=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]

    def mean(key: str) -> float:
        vals = [r[key] for r in rows if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else float("nan")

    return {
        "summary": summary,
        "curve": [(r["sim_end_s"], r["accuracy"]) for r in rows if r.get("accuracy") is not None],
        "mean_download_s": mean("mean_download_s"),
        "bytes_down": summary["bytes_down"],
        "mean_compute_s": mean("mean_compute_s"),
        "mean_upload_s": mean("mean_upload_s"),
        "mean_round_s": mean("round_duration_s"),
        "mean_upload_bytes": sum(sum(r["client_upload_bytes"]) for r in rows)
        / max(1, sum(r["completed"] for r in rows)),
        "cut": sum(r["cut"] for r in rows),
        "late": sum(r["late"] for r in rows),
        "selected": sum(r["selected"] for r in rows),
        "sets": sets[2:],
    }


def plot(results: dict, target: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(NETWORKS), figsize=(11, 4.8))
    for ax, net in zip(axes, NETWORKS):
        for method in METHODS:
            r = results[f"{net}-{method}"]
            xs = [t / 60 for t, _ in r["curve"]]
            ys = [100 * a for _, a in r["curve"]]
            ax.plot(xs, ys, "-", marker="o", markersize=2.5, linewidth=1.2, label=LABELS[method])
        ax.axhline(100 * target, color="grey", linestyle="--", linewidth=1, label=f"target {100 * target:.0f}%")
        ax.axhline(100 * SECOND_TARGET, color="grey", linestyle=":", linewidth=1, label=f"{100 * SECOND_TARGET:.0f}%")
        ax.set_title({"lte": "LTE (mahimahi traces)", "3g": "3G (Norway HSDPA traces)"}[net])
        ax.set_xscale("log")  # the methods differ by up to ~10× in time: equal ratios, equal distances
        ax.set_xlabel("simulated time (minutes, log scale)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(70, 97)  # the approach to the targets; the first rounds (below 70%) are cut off
        ax.grid(alpha=0.3)
    fig.suptitle("MNIST non-IID, 100 phones, McMahan 2NN, churn: accuracy vs simulated time")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)  # one legend, off the curves
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def time_to(curve: list[tuple[float, float]], target: float) -> float | None:
    return next((t for t, a in curve if a >= target), None)


def figures(results: dict) -> dict:
    out = {}
    for net in NETWORKS:
        for method in METHODS:
            if method == "dense":
                continue
            d, g = results[f"{net}-dense"], results[f"{net}-{method}"]
            td, tg = d["summary"]["time_to_target_s"], g["summary"]["time_to_target_s"]
            td2, tg2 = time_to(d["curve"], SECOND_TARGET), time_to(g["curve"], SECOND_TARGET)
            base = d["mean_download_s"] + d["mean_compute_s"]
            own = g["mean_download_s"] + g["mean_compute_s"]  # this method's own download (compressed or not) + compute
            out[f"{net}-{method}"] = {
                "speedup_time_to_second_target": (td2 / tg2) if td2 and tg2 else None,
                "dense_time_to_second_target_s": td2,
                "dgc_time_to_second_target_s": tg2,
                "dense_time_to_target_s": td,
                "dgc_time_to_target_s": tg,
                "speedup_time_to_target": (td / tg) if td and tg else None,
                "dense_rounds_to_target": d["summary"]["rounds_to_target"],
                "dgc_rounds_to_target": g["summary"]["rounds_to_target"],
                "dense_final_accuracy": d["summary"]["final_accuracy"],
                "dgc_final_accuracy": g["summary"]["final_accuracy"],
                "dense_mean_round_s": d["mean_round_s"],
                "dgc_mean_round_s": g["mean_round_s"],
                "round_time_speedup": d["mean_round_s"] / g["mean_round_s"],
                "mean_download_s": d["mean_download_s"],
                "dgc_mean_download_s": g["mean_download_s"],
                "mean_compute_s": d["mean_compute_s"],
                "dense_mean_upload_s": d["mean_upload_s"],
                "dgc_mean_upload_s": g["mean_upload_s"],
                "speedup_bound": (base + d["mean_upload_s"]) / (own + g["mean_upload_s"]),
                "speedup_bound_zero_dgc_upload": (base + d["mean_upload_s"]) / own,
                "dgc_mean_compute_s": g["mean_compute_s"],
                "speedup_bound_compute_only": (base + d["mean_upload_s"]) / g["mean_compute_s"],
                "dense_bytes_down": d["bytes_down"],
                "dgc_bytes_down": g["bytes_down"],
                "dense_bytes_up": d["summary"]["bytes_up"],
                "dgc_bytes_up": g["summary"]["bytes_up"],
                "dgc_compression_ratio_up": g["summary"]["compression_ratio_up"],
                "dense_wall_s": d["summary"]["wall_time_s"],
                "dgc_wall_s": g["summary"]["wall_time_s"],
            }
    return out


def fmt_t(t: float | None) -> str:
    return "not reached" if t is None else f"{t:.0f} s ({t / 60:.1f} min)"


def write_results(results: dict, figs: dict, scen: dict, path: Path) -> None:
    target = scen["eval"]["target_accuracy"]
    c = scen["compression"]
    lines = [
        BEGIN,
        "## Mobile networks: simulated time to target, dense FedAvg vs DGC",
        "",
        (
            f"`bench/mobile_time_to_target.py`, scenarios `scenarios/mnist_lte_dropouts.yaml` and "
            f"`scenarios/mnist_3g_dropouts.yaml`: {scen['data']['num_clients']} phones, MNIST split by Dirichlet "
            f"α = {scen['data']['alpha']}, `{scen['model']['name']}` (199,210 parameters, 0.80 MB fp32), "
            f"{scen['client']['local_steps']} local SGD steps of batch {scen['client']['batch_size']} at lr "
            f"{scen['client']['lr']}, C = {scen['strategy']['fraction']} with 130% over-selection (13 selected, the "
            f"first 10 updates kept), exponential availability churn (mean online {scen['network']['mean_on_s']:.0f} s, "
            f"offline {scen['network']['mean_off_s']:.0f} s), device tiers `mixed` (100/500/2000 samples/s), "
            f"{scen['rounds']} rounds, target {100 * target:.0f}% test accuracy. DGC: density {c['density']} after a "
            f"{c['warmup_rounds']}-round warm-up, plain error feedback (momentum correction off, as docs/dgc.md "
            "advises for sparse participation), the dense model downloaded; `dgc_d0.1` the same at density 0.1. "
            "`dgc_d0.03+down0.03` and `dgc_d0.1+down0.1`: DGC uploads at 0.03 / 0.1 and compressed downloads "
            "(`downlink.name=topk`, the same density: top-k of the difference between the global model and the "
            "model each phone holds, see downlink.md). Dense: the same scenario with `--set compression.name=none`. "
            "LTE links replay the mahimahi AT&T LTE driving, T-Mobile LTE and Verizon LTE traces (separate measured "
            "up and down traces); 3G links replay ten Norway HSDPA traces (Pensieve), uplink = downlink × 0.84/1.5."
        ),
        "",
        "![accuracy vs simulated time](img/mobile_time_to_target.png)",
        "",
        (
            f"| network | method | time to {100 * target:.0f}% | rounds to {100 * target:.0f}% | "
            f"time to {100 * SECOND_TARGET:.0f}% | final acc. | best acc. | mean round | upload MB (all) | "
            "ratio on the wire | wall s |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for net in NETWORKS:
        for method in METHODS:
            r = results[f"{net}-{method}"]
            s = r["summary"]
            lines.append(
                f"| {net} | {method} | {fmt_t(s['time_to_target_s'])} | {s['rounds_to_target'] or '–'} | "
                f"{fmt_t(time_to(r['curve'], SECOND_TARGET))} | {100 * s['final_accuracy']:.2f}% | "
                f"{100 * s['best_accuracy']:.2f}% | {r['mean_round_s']:.1f} s | {s['bytes_up'] / 1e6:.1f} | "
                f"{s['compression_ratio_up']:.1f}× | {s['wall_time_s']:.0f} |"
            )
    lines += [
        "",
        "Where the time goes (means over rounds of the kept clients' phase times; d, c, u: dense FedAvg's download, "
        "compute, upload; d′, c′, u′: the method's own — c′ < c where small transfers let the fast phones finish "
        "first and over-selection drops the slow ones) and the bounds on the per-round speed-up:",
        "",
        (
            "| network, method | d s | d′ s | c s | c′ s | u s | u′ s | download MB (all) | "
            "bound (d+c+u)/(d′+c′+u′) | bound with a free upload (d+c+u)/(d′+c′) | bound with free transfers (d+c+u)/c′ | "
            f"measured round-time ratio | measured time-to-{100 * target:.0f}% ratio | "
            f"measured time-to-{100 * SECOND_TARGET:.0f}% ratio |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, f in figs.items():
        sp = f"{f['speedup_time_to_target']:.2f}×" if f["speedup_time_to_target"] else "–"
        sp2 = f"{f['speedup_time_to_second_target']:.2f}×" if f["speedup_time_to_second_target"] else "–"
        lines.append(
            f"| {key} | {f['mean_download_s']:.2f} | {f['dgc_mean_download_s']:.2f} | {f['mean_compute_s']:.2f} | "
            f"{f['dgc_mean_compute_s']:.2f} | "
            f"{f['dense_mean_upload_s']:.2f} | {f['dgc_mean_upload_s']:.2f} | {f['dgc_bytes_down'] / 1e6:.1f} | "
            f"{f['speedup_bound']:.2f}× | {f['speedup_bound_zero_dgc_upload']:.2f}× | "
            f"{f['speedup_bound_compute_only']:.2f}× | {f['round_time_speedup']:.2f}× | {sp} | {sp2} |"
        )
    lines.append(END)
    write_block(path, BEGIN, END, "\n".join(lines))


def grid_figures(results: dict) -> dict:
    out = {}
    for net in NETWORKS:
        dense = results[f"{net}-dense"]["summary"]["time_to_target_s"]
        for up in GRID:
            for down in GRID:
                s = results[f"{net}-up{up}-down{down}"]["summary"]
                t = s["time_to_target_s"]
                out[f"{net}-up{up}-down{down}"] = {
                    "time_to_target_s": t, "rounds_to_target": s["rounds_to_target"],
                    "speedup_time_to_target": dense / t if dense and t else None,
                    "final_accuracy": s["final_accuracy"]}
    return out


def write_grid(results: dict, figs: dict, scen: dict, path: Path) -> None:
    target = 100 * scen["eval"]["target_accuracy"]
    lines = [GRID_BEGIN, f"Speed-up in simulated time to {target:.0f}% over dense FedAvg, for every pair of densities "
             f"(`bench/mobile_time_to_target.py --grid`, seed {scen['seed']}; DGC uploads, top-k model-difference "
             "downloads; each cell: speed-up, time and rounds to the target, final accuracy):", ""]
    for net in NETWORKS:
        dense = results[f"{net}-dense"]["summary"]
        lines += [f"**{net}** — dense: {fmt_t(dense['time_to_target_s'])}, {dense['rounds_to_target']} rounds, "
                  f"final {100 * dense['final_accuracy']:.2f}%", "",
                  "| upload density ↓ / download density → | " + " | ".join(str(d) for d in GRID) + " |",
                  "|---|" + "---|" * len(GRID)]
        for up in GRID:
            cells = []
            for down in GRID:
                f = figs[f"{net}-up{up}-down{down}"]
                if f["speedup_time_to_target"] is None:
                    cells.append(f"not reached ({100 * f['final_accuracy']:.2f}%)")
                else:
                    cells.append(f"**{f['speedup_time_to_target']:.2f}×** ({f['time_to_target_s']:.0f} s, "
                                 f"{f['rounds_to_target']} r., {100 * f['final_accuracy']:.2f}%)")
            lines.append(f"| {up} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(GRID_END)
    write_block(path, GRID_BEGIN, GRID_END, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "runs" / "bench-mobile"))
    parser.add_argument("--rounds", type=int, help="override the scenarios' rounds")
    parser.add_argument("--seed", type=int, help="override the scenario's seed (use another --out)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--reuse", action="store_true", help="reuse run folders that already have summary.json")
    parser.add_argument("--results", default=str(REPO / "docs" / "results.md"))
    parser.add_argument("--write", action="store_true",
                        help="write the figures into docs/results.md (--results) and the plot; without it nothing there changes")
    parser.add_argument("--no-write", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for old commands
    parser.add_argument("--grid", action="store_true",
                        help="run the 3×3 grid of upload × download densities instead of METHODS")
    args = parser.parse_args(argv)

    from fedgc.scenario.model import load_tree

    scen = load_tree(REPO / "scenarios" / NETWORKS["lte"][0])
    extra = []
    if args.rounds:
        scen["rounds"] = args.rounds
        extra.append(f"rounds={args.rounds}")
    if args.seed is not None:
        scen["seed"] = args.seed
        extra.append(f"seed={args.seed}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.grid:
        methods = grid_methods()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {f"{net}-{m}": pool.submit(run_one, net, m, out, extra, args.reuse, methods)
                       for net in NETWORKS for m in methods}
            results = {k: f.result() for k, f in futures.items()}
        figs = grid_figures(results)
        if args.write:
            write_grid(results, figs, scen, Path(args.results))
        print(json.dumps(figs))
        return 0
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            f"{net}-{m}": pool.submit(run_one, net, m, out, extra, args.reuse) for net in NETWORKS for m in METHODS
        }
        results = {k: f.result() for k, f in futures.items()}
    figs = figures(results)
    if args.write:
        plot(results, scen["eval"]["target_accuracy"], PLOT)
        write_results(results, figs, scen, Path(args.results))
    figs["target_10x_met"] = any((f["speedup_time_to_target"] or 0) >= 10 for f in figs.values())
    print(json.dumps(figs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
