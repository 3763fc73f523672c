"""DGC reproduction on MNIST: dense momentum SGD vs DGC at 99.9% sparsity and its ablations.

    .venv/bin/python bench/dgc_mnist.py [--jobs 2] [--rounds N] [--out runs/bench-dgc-mnist] [--reuse] [--write]

Runs ``scenarios/dgc_mnist.yaml`` (data-parallel mode, see docs/dgc.md) once per variant with
``python -m fedgc run --set ...``, reads each run's ``summary.json`` / ``metrics.jsonl``, writes
with ``--write`` the table into ``docs/results.md`` (between the ``dgc-mnist`` markers) and prints the figures as one
JSON object on its last line.

Variants (all at the scenario's seed, model, batch and learning rate):

* ``dense``: ``compression.name=none`` with FedAvgM on the server (momentum = the scenario's
  ``compression.momentum``, server lr 1). With every client every round and one local step this is
  exactly momentum SGD on the averaged gradient, the paper's baseline (and the same arithmetic as
  DGC's momentum correction at density 1 without masking).
* ``dgc``: the scenario as written (all four techniques).
* ``no_momentum_correction``: ``compression.momentum_correction=false`` with the momentum moved to
  the server (FedAvgM, same m): momentum applied *after* sparsification, i.e. the paper's
  "gradient dropping + momentum SGD" (§3.2, eq. 3–6) that momentum correction fixes.
* ``no_momentum_correction_no_momentum``: ``compression.momentum_correction=false`` alone: plain
  error feedback and no momentum anywhere (optional, ``--extra``).
* ``no_warmup``: ``compression.warmup_rounds=0``.
* ``no_masking``: ``compression.momentum_masking=false``.
* ``no_clipping``: ``compression.clip_norm=null``.

Data: MNIST IDX files under ``$FEDGC_SHARED_DIR/data/mnist`` (default ``../shared`` next to the
repository); the path is passed as ``--set data.root=...`` so the bench runs from any directory.
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
SCENARIO = REPO / "scenarios" / "dgc_mnist.yaml"
BEGIN, END = "<!-- dgc-mnist:begin -->", "<!-- dgc-mnist:end -->"


def variants(momentum: float, extra: bool) -> dict[str, list[str]]:
    server_momentum = ["strategy.server_optimizer=momentum", f"strategy.server_momentum={momentum}"]
    out = {
        "dense": ["compression.name=none", *server_momentum],
        "dgc": [],
        "no_momentum_correction": ["compression.momentum_correction=false", *server_momentum],
        "no_warmup": ["compression.warmup_rounds=0"],
        "no_masking": ["compression.momentum_masking=false"],
        "no_clipping": ["compression.clip_norm=null"],
    }
    if extra:
        out["no_momentum_correction_no_momentum"] = ["compression.momentum_correction=false"]
    return out


# The paper's claim for each row (Lin et al., ICLR 2018).
PAPER = {
    "dense": "baseline: momentum SGD",
    "dgc": "99.9% sparsity without accuracy loss (ResNet-110/CIFAR-10, AlexNet and ResNet-50/ImageNet, LSTM/PTB, "
    "DeepSpeech); gradient compression 270–600×",
    "no_momentum_correction": "needed: sparsifying before momentum (gradient dropping) loses accuracy on "
    "ResNet-110/CIFAR-10 (§3.2, §5)",
    "no_momentum_correction_no_momentum": "(not in the paper: no momentum at all)",
    "no_warmup": "warm-up helps the early phase of training (§3.3)",
    "no_masking": "needed: masking stops stale momentum; without it accuracy drops (§3.3)",
    "no_clipping": "clipping prevents gradient explosion, mainly for RNNs (§3.2); no CNN accuracy claim",
}


def shared_dir() -> Path:
    return Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared")).resolve()


def run_variant(name: str, sets: list[str], out: Path, base_sets: list[str], reuse: bool, partial: bool) -> dict:
    run_dir = out / name
    if not (reuse and (run_dir / "summary.json").is_file()) and not partial:
        cmd = [sys.executable, "-m", "fedgc.cli.run", str(SCENARIO), "--out", str(run_dir), "--overwrite", "--quiet"]
        for s in [*base_sets, *sets]:
            cmd += ["--set", s]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        start = time.time()
        with open(out / f"{name}.log", "w") as log:
            rc = subprocess.run(cmd, check=False, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        print(f"{name}: rc={rc} in {time.time() - start:.0f}s", file=sys.stderr, flush=True)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    if (run_dir / "summary.json").is_file():
        summary = json.loads((run_dir / "summary.json").read_text())
    elif partial and rows:  # a run still in progress: its figures so far, marked as partial
        accs = [r["accuracy"] for r in rows if r.get("accuracy") is not None]
        summary = {
            "final_accuracy": accs[-1],
            "best_accuracy": max(accs),
            "bytes_up": sum(r["bytes_up"] for r in rows),
            "dense_bytes_up": sum(r["dense_bytes_up"] for r in rows),
            "compression_ratio_up": sum(r["dense_bytes_up"] for r in rows) / sum(r["bytes_up"] for r in rows),
            "rounds": max(r["round"] for r in rows if r.get("accuracy") is not None),
            "wall_time_s": float("nan"),
        }
        rows = [r for r in rows if r["round"] <= summary["rounds"]]
    else:
        raise FileNotFoundError(run_dir / "summary.json")
    evals = [(r["round"], r["accuracy"]) for r in rows if r.get("accuracy") is not None]
    last3 = [a for _, a in evals[-3:]]
    warm_evals = [a for r, a in evals if r <= max(1, summary["rounds"] // 10)]
    steady = [r for r in rows if r["density"] == rows[-1]["density"]]  # the rounds after the warm-up
    ratio_steady = sum(r["dense_bytes_up"] for r in steady) / max(1, sum(r["bytes_up"] for r in steady))
    steady_upload = sum(sum(r["client_upload_bytes"]) for r in steady) / max(1, sum(r["completed"] for r in steady))
    return {
        "final_accuracy": summary["final_accuracy"],
        "best_accuracy": summary["best_accuracy"],
        "mean_last3_accuracy": sum(last3) / len(last3),
        "early_accuracy": warm_evals[-1] if warm_evals else None,
        "bytes_up": summary["bytes_up"],
        "dense_bytes_up": summary["dense_bytes_up"],
        "compression_ratio_up": summary["compression_ratio_up"],
        "ratio_after_warmup": ratio_steady,
        "upload_bytes_per_message_after_warmup": steady_upload,
        "rounds": summary["rounds"],
        "wall_time_s": summary["wall_time_s"],
        "accuracy_curve": evals,
        "sets": sets,
    }


def write_results(results: dict, scenario: dict, path: Path) -> None:
    dense = results["dense"]
    n = scenario["data"]["num_clients"]
    c = scenario["compression"]
    first_eval = results["dgc"]["accuracy_curve"][0][0] if results["dgc"]["accuracy_curve"] else None
    early_round = max(1, scenario["rounds"] // 10)
    lines = [
        BEGIN,
        "## DGC on MNIST, data-parallel mode",
        "",
        (
            f"`bench/dgc_mnist.py`, scenario `scenarios/dgc_mnist.yaml`: {n} workers, IID MNIST (60k train, full 10k "
            f"test set), `{scenario['model']['name']}`, one SGD step per round with worker batch "
            f"{scenario['client']['batch_size']} (total batch {n * scenario['client']['batch_size']}), lr "
            f"{scenario['client']['lr']}, momentum {c['momentum']}, {scenario['rounds']} rounds "
            f"(= {scenario['rounds'] * n * scenario['client']['batch_size'] / 60000:.1f} epochs), every worker every "
            f"round, server lr 1. DGC: density {c['density']} (99.9% sparsity), warm-up over {c['warmup_rounds']} "
            f"rounds, clip_norm {c['clip_norm']} (update units), sampled top-k (sample_ratio {c['sample_ratio']}). "
            "Dense = `compression.name=none` with FedAvgM (server momentum = the same m, server lr 1), which with "
            "one local step and full participation is exactly momentum SGD on the averaged gradient."
        ),
        "",
        (
            "Accuracy is on the full MNIST test set; *final* is after the last round, *mean last 3* averages the last "
            f"three evaluations (every {scenario['eval']['every']} rounds) as a noise check, *early* is the accuracy at "
            f"round {early_round} (warm-up effect). Upload bytes are real Flower wire bytes of all workers' replies; "
            "the ratio is dense fp32 reply bytes / actual reply bytes (`compression_ratio_up`)."
        ),
        "",
        (
            "| variant | final acc. | Δ vs dense (pp) | mean last 3 | early acc. | upload MB | ratio on the wire | "
            "ratio after warm-up | B per upload after warm-up | wall s | paper's claim |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    dense_at = dict(dense["accuracy_curve"])
    for name, r in results.items():
        # A partial run (--partial) is compared with dense at the same round.
        delta = 100 * (r["final_accuracy"] - dense_at.get(r["rounds"], dense["final_accuracy"]))
        shown = f"`{name}`" + (f" (partial: {r['rounds']} rounds)" if r["rounds"] < scenario["rounds"] else "")
        early = f"{100 * r['early_accuracy']:.2f}%" if r["early_accuracy"] is not None else "–"
        lines.append(
            f"| {shown} | {100 * r['final_accuracy']:.2f}% | {delta:+.2f} | {100 * r['mean_last3_accuracy']:.2f}% | "
            f"{early} | {r['bytes_up'] / 1e6:.2f} | {r['compression_ratio_up']:.1f}× | {r['ratio_after_warmup']:.1f}× | "
            f"{r['upload_bytes_per_message_after_warmup']:,.0f} | {r['wall_time_s']:.0f} | "
            f"{PAPER.get(name, '')} |"
        )
    lines += ["", "Overrides per variant (`--set`):", ""]
    for name, r in results.items():
        lines.append(f"* `{name}`: " + (" ".join(f"`{s}`" for s in r["sets"]) or "(none: the scenario as written)"))
    lines += ["", "Accuracy curves (round: accuracy %):", ""]
    for name, r in results.items():
        lines.append(f"* `{name}`: " + ", ".join(f"{rnd}: {100 * a:.2f}" for rnd, a in r["accuracy_curve"]))
    del first_eval
    lines.append(END)
    write_block(path, BEGIN, END, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "runs" / "bench-dgc-mnist"))
    parser.add_argument("--rounds", type=int, help="override the scenario's rounds")
    parser.add_argument("--seed", type=int, help="override the scenario's seed (use another --out)")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel")
    parser.add_argument("--only", nargs="*", help="run only these variants")
    parser.add_argument("--extra", action="store_true", help="also run momentum_correction=false without any momentum")
    parser.add_argument("--reuse", action="store_true", help="reuse run folders that already have summary.json")
    parser.add_argument(
        "--partial", action="store_true", help="run nothing; report runs still in progress up to their last evaluation"
    )
    parser.add_argument("--results", default=str(REPO / "docs" / "results.md"))
    parser.add_argument("--write", action="store_true", help="write the table into docs/results.md (otherwise "
                        "only print the figures)")
    parser.add_argument("--no-write", action="store_true", help="(the default; kept for old command lines)")
    args = parser.parse_args(argv)

    from fedgc.scenario.model import load_tree, validate

    scenario = validate(load_tree(SCENARIO)).model_dump(mode="json")  # defaults filled in
    base_sets = [f"data.root={shared_dir() / 'data' / 'mnist'}"]
    if args.rounds:
        scenario["rounds"] = args.rounds
        base_sets.append(f"rounds={args.rounds}")
    if args.seed is not None:
        scenario["seed"] = args.seed
        base_sets.append(f"seed={args.seed}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = variants(scenario["compression"]["momentum"], args.extra)
    if args.only:
        todo = {k: v for k, v in todo.items() if k in args.only or k in ("dense", "dgc")}
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            name: pool.submit(run_variant, name, sets, out, base_sets, args.reuse, args.partial)
            for name, sets in todo.items()
        }
        results = {name: f.result() for name, f in futures.items()}
    if args.write and not args.no_write:
        write_results(results, scenario, Path(args.results))
    dense = results["dense"]["final_accuracy"]
    figures = {
        name: {
            k: r[k]
            for k in (
                "final_accuracy",
                "mean_last3_accuracy",
                "early_accuracy",
                "bytes_up",
                "compression_ratio_up",
                "ratio_after_warmup",
                "wall_time_s",
            )
        }
        for name, r in results.items()
    }
    figures["dgc_minus_dense_pp"] = 100 * (results["dgc"]["final_accuracy"] - dense)
    figures["target_within_0.3pp"] = abs(figures["dgc_minus_dense_pp"]) <= 0.3 or figures["dgc_minus_dense_pp"] > 0
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
