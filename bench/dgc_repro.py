"""DGC reproduction on any scenario: dense momentum SGD vs DGC and its ablations, over several seeds.

    .venv/bin/python bench/dgc_repro.py --scenario scenarios/dgc_shakespeare.yaml --seeds 0,1 [--jobs 2]
        [--rounds N] [--set KEY=VALUE ...] [--out runs/bench-dgc-shakespeare] [--write] [--partial]

Runs the scenario (data-parallel mode, docs/dgc.md) once per variant and seed with
``python -m fedgc run --set ...`` (``--jobs`` processes at a time), reads each run's
``summary.json`` / ``metrics.jsonl``, and prints one JSON object on its last line: per variant the
mean and sample standard deviation over seeds (``n`` seeds) of the final next-sample accuracy, the
final test loss (mean cross-entropy) and the perplexity exp(loss), and the wire ratio after warm-up.
With ``--write`` it also writes its table between the ``<!-- NAME-repro:begin -->`` and
``<!-- NAME-repro:end -->`` markers of ``docs/results.md`` (NAME = the scenario's name) and the
accuracy curves to ``docs/img/NAME_accuracy.png``.

Resumable: a run folder whose ``metrics.jsonl`` already reaches the requested rounds is reused
(``--rerun`` runs it again), and one short of them with a ``checkpoint.pt`` (cut short: no
``summary.json``, or one that says ``interrupted``; or completed at fewer rounds) goes on from its last
checkpoint (``fedgc run --resume``). When ``--rounds`` differs from the folder's, the folder's
``scenario.yaml`` is given the new ``rounds`` first (a resume may raise them, or lower them down to the
last round the run wrote), so a bench can be run to a horizon and later extended. A run longer than
the requested rounds is read up to them: its first rounds are those of a run of that length.
With ``--block NAME`` the table goes between ``NAME-repro`` markers (and the plot to
``docs/img/NAME_accuracy.png``), so one scenario can hold several blocks (an early-phase and a plateau
comparison). The verdict on "DGC within 1 pp of dense" reads the *plateau* accuracy: the mean of each
run's evaluations over the second half of its rounds, which a single evaluation's noise moves less.
``--partial`` runs nothing and reports the runs so far, up to their last evaluation (marked partial).

Variants (all at the scenario's model, batch and learning rate; ``C`` = ``compression.clip_norm``,
``N`` = ``data.num_clients``, ``m`` = ``compression.momentum``):

* ``dense``: ``compression.name=none`` with FedAvgM on the server (momentum m, server lr 1). With
  every client every round and one local step this is exactly momentum SGD on the averaged
  gradient, the paper's baseline. With ``--dense-clip`` (the default when the scenario clips) each
  worker's update is also clipped at C/√N by the server (``strategy.clip_update_norm``) before it
  is averaged, the same per-worker clipping DGC applies locally: the baseline then differs from
  ``dgc`` only by the compression.
* ``dgc``: the scenario as written (all four techniques).
* ``no_momentum_correction``: ``compression.momentum_correction=false`` with the momentum moved to
  the server (FedAvgM, same m): momentum applied after sparsification, the paper's "gradient
  dropping + momentum SGD" (§3.2) that momentum correction fixes.
* ``no_clipping``: ``compression.clip_norm=null``.
* ``no_masking``: ``compression.momentum_masking=false``.
* ``no_warmup``: ``compression.warmup_rounds=0``.
* ``--extra`` adds ``dense_no_clipping`` (dense without any clipping: does the dense baseline itself
  need it?) and ``no_momentum_correction_no_momentum`` (error feedback, no momentum anywhere).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_block import write_block

REPO = Path(__file__).resolve().parents[1]
ORDER = ("dense", "dgc", "no_momentum_correction", "no_clipping", "no_masking", "no_warmup",
         "dense_no_clipping", "no_momentum_correction_no_momentum")

# The paper's claim for each row (Lin et al., ICLR 2018).
PAPER = {
    "dense": "baseline: momentum SGD (PTB 2-layer LSTM: perplexity 72.30)",
    "dgc": "no loss at 99.9% sparsity (PTB LSTM: perplexity 72.24 at 462× gradient compression)",
    "no_momentum_correction": "gradient dropping loses accuracy (PTB: perplexity 103.18)",
    "no_clipping": "local gradient clipping prevents gradient explosion, needed for RNNs (§3.2)",
    "no_masking": "masking stops stale momentum (§3.3)",
    "no_warmup": "warm-up helps the early phase of training (§3.3)",
    "dense_no_clipping": "(not in the paper: dense without clipping)",
    "no_momentum_correction_no_momentum": "(not in the paper: no momentum at all)",
}


def variants(compression: dict, num_clients: int, dense_clip: bool, extra: bool) -> dict[str, list[str]]:
    """The ``--set`` overrides of each variant, in table order."""
    m = compression["momentum"]
    server_momentum = ["strategy.server_optimizer=momentum", f"strategy.server_momentum={m}"]
    clip = compression.get("clip_norm")
    dense_clip_sets = [f"strategy.clip_update_norm={clip / math.sqrt(num_clients):.6g}"] if dense_clip and clip else []
    out = {
        "dense": ["compression.name=none", *server_momentum, *dense_clip_sets],
        "dgc": [],
        "no_momentum_correction": ["compression.momentum_correction=false", *server_momentum],
        "no_clipping": ["compression.clip_norm=null"],
        "no_masking": ["compression.momentum_masking=false"],
        "no_warmup": ["compression.warmup_rounds=0"],
    }
    if extra:
        out["dense_no_clipping"] = ["compression.name=none", *server_momentum]
        out["no_momentum_correction_no_momentum"] = ["compression.momentum_correction=false"]
    return out


def summarize_run(rows: list[dict], summary: dict | None, rounds: int) -> dict:
    """One run's figures from its ``metrics.jsonl`` rows (and ``summary.json``; ``None``: partial)."""
    rows = [r for r in rows if r["round"] <= rounds]  # a longer run's first ``rounds`` rounds are that run's
    evals = [(r["round"], r["accuracy"], r.get("loss")) for r in rows if r.get("accuracy") is not None]
    if not evals:
        raise ValueError("no evaluation yet")
    last_round = evals[-1][0]
    late = [(rnd, a) for rnd, a, _ in evals if rnd > rounds / 2]
    rows = [r for r in rows if r["round"] <= last_round]
    warm = max(1, rounds // 10)
    early = [a for rnd, a, _ in evals if rnd <= warm]
    steady = [r for r in rows if r["density"] == rows[-1]["density"]]  # the rounds after the warm-up
    train_losses = [r["train_loss"] for r in rows if r.get("train_loss") is not None]
    tenth = max(1, rounds // 10)
    loss = evals[-1][2]
    clipped = [len(r.get("clipped_nodes") or []) / max(1, r["completed"]) for r in rows]
    return {
        "final_accuracy": evals[-1][1],
        "final_loss": loss,
        "perplexity": math.exp(loss) if loss is not None and loss < 700 else float("inf"),
        "best_accuracy": max(a for _, a, _ in evals),
        "mean_last3_accuracy": sum(a for _, a, _ in evals[-3:]) / len(evals[-3:]),
        # The mean of the evaluations over the second half of the rounds: the plateau, once there is one;
        # and their least-squares slope, accuracy per round: about 0 at a plateau, > 0 while still climbing.
        "plateau_accuracy": statistics.fmean(a for _, a in late) if late else None,
        "plateau_slope": slope(late),
        "early_accuracy": early[-1] if early else None,
        "ratio_after_warmup": sum(r["dense_bytes_up"] for r in steady) / max(1, sum(r["bytes_up"] for r in steady)),
        "ratio_on_wire": sum(r["dense_bytes_up"] for r in rows) / max(1, sum(r["bytes_up"] for r in rows)),
        "upload_bytes_per_message_after_warmup":
            sum(sum(r["client_upload_bytes"]) for r in steady) / max(1, sum(r["completed"] for r in steady)),
        # The largest round train loss after the first tenth (round 1's is ln(classes) for every variant).
        "max_train_loss": max(train_losses[tenth:]) if train_losses[tenth:] else None,
        # Mean round train loss over the first and the last tenth of the rounds (every round, unlike the evaluations).
        "early_train_loss": statistics.fmean(train_losses[:tenth]) if train_losses else None,
        "late_train_loss": statistics.fmean(train_losses[-tenth:]) if train_losses else None,
        "nonfinite_train_loss": sum(1 for v in train_losses if not math.isfinite(v)),
        "clipped_share": sum(clipped) / max(1, len(clipped)),  # server-side clipping (dense baseline)
        "rounds": last_round,
        "partial": summary is None or last_round < rounds,
        "wall_time_s": summary["wall_time_s"] if summary else float("nan"),
        "accuracy_curve": [(rnd, a) for rnd, a, _ in evals],
        "loss_curve": [(rnd, lo) for rnd, _, lo in evals],
        "train_loss_curve": train_losses,
    }


def slope(points: list[tuple[int, float]]) -> float | None:
    """The least-squares slope of ``(x, y)`` points; None for fewer than 3."""
    if len(points) < 3:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n − 1; 0 for one value); ``None`` for no values."""
    values = [float(v) for v in values]
    if not values:
        return None, None
    if not all(math.isfinite(v) for v in values):  # a partial run's NaN wall time, a diverged run's inf loss
        return statistics.fmean(values), float("nan")
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


STAT_KEYS = ("final_accuracy", "final_loss", "perplexity", "mean_last3_accuracy", "plateau_accuracy", "plateau_slope",
             "early_accuracy",
             "early_train_loss", "late_train_loss",
             "ratio_after_warmup", "ratio_on_wire", "upload_bytes_per_message_after_warmup", "max_train_loss",
             "clipped_share", "wall_time_s")


def aggregate(per_seed: dict[int, dict]) -> dict:
    """Per-seed run figures of one variant → ``{key: mean, key_std: std, n, seeds, partial}``."""
    out: dict = {"n": len(per_seed), "seeds": sorted(per_seed)}
    for key in STAT_KEYS:
        vals = [r[key] for r in per_seed.values() if r.get(key) is not None]
        out[key], out[f"{key}_std"] = mean_std(vals)
    out["partial"] = any(r["partial"] for r in per_seed.values())
    out["rounds"] = min(r["rounds"] for r in per_seed.values())
    # Mean curve over the seeds, at the rounds every seed evaluated.
    curves = [dict(r["accuracy_curve"]) for r in per_seed.values()]
    common = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    out["accuracy_curve"] = [(rnd, statistics.fmean(c[rnd] for c in curves)) for rnd in common]
    return out


def read_summary(run_dir: Path) -> dict | None:
    """``run_dir``'s ``summary.json``, or None when there is none or it is not a JSON object (a run killed
    while writing it, an edited file: the run is then not taken as finished)."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text()[:1_000_000])
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def set_rounds(run_dir: Path, rounds: int) -> bool:
    """Give the run folder's ``scenario.yaml`` ``rounds`` (its one top-level ``rounds:`` line, the rest
    untouched); False when the file does not have exactly one such line."""
    from fedgc.bounded import read_text, write_whole

    path = run_dir / "scenario.yaml"
    try:
        text = read_text(path, "the run's scenario.yaml", 1_000_000)
    except (OSError, ValueError):
        return False
    new, count = re.subn(r"(?m)^rounds: *\d+ *$", f"rounds: {rounds}", text)
    if count != 1:
        return False
    if new != text:
        write_whole(path, new)
    return True


def run_one(scenario: Path, run_dir: Path, sets: list[str], rounds: int, rerun: bool, partial: bool) -> dict | None:
    from fedgc.core.checkpoint import last_round_written

    done = (read_summary(run_dir) or {}).get("rounds") == rounds or (last_round_written(run_dir) or 0) >= rounds
    if (not done and not partial) or (rerun and not partial):
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        stopped = (read_summary(run_dir) or {}).get("stopped_reason")
        if (not rerun and (run_dir / "checkpoint.pt").is_file() and stopped in (None, "interrupted", "completed")
                and set_rounds(run_dir, rounds)):
            # A run cut short (the bench stopped, the machine went away), or one completed at fewer rounds:
            # go on from its last checkpoint to the requested rounds.
            cmd = [sys.executable, "-m", "fedgc.cli.run", "--resume", str(run_dir), "--quiet"]
        else:
            cmd = [sys.executable, "-m", "fedgc.cli.run", str(scenario), "--out", str(run_dir), "--overwrite", "--quiet"]
            for s in sets:
                cmd += ["--set", s]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        start = time.time()
        with open(run_dir.with_suffix(".log"), "a") as log:
            rc = subprocess.run(cmd, check=False, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        print(f"{run_dir}: rc={rc} in {time.time() - start:.0f}s", file=sys.stderr, flush=True)
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        return None
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    summary = read_summary(run_dir)
    try:
        return summarize_run(rows, summary, rounds)
    except ValueError:
        return None


def fmt(mean: float, std: float, n: int, scale: float = 1.0, digits: int = 2) -> str:
    if mean is None or not math.isfinite(mean):
        return "–"
    return f"{scale * mean:.{digits}f}" + (f" ± {scale * std:.{digits}f}" if n > 1 else "")


def provenance() -> str:
    """When, at which commit and on what machine the block is written."""
    import torch
    from results_block import commit

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"Written {time.strftime('%Y-%m-%d')} at commit {commit(REPO) or 'unknown'}, CPU kernel set "
            f"{torch.backends.cpu.get_cpu_capability()}, {gpu}, torch {torch.__version__}. A run's own code is "
            "that of the commit it was started or last resumed at (its folder's log).")


def render(results: dict[str, dict], scenario: dict, sets: dict[str, list[str]], base_sets: list[str],
           begin: str, end: str, plot: str | None, written: str = "") -> str:
    """The block for docs/results.md (pure: from the aggregated figures; ``written``: ``provenance()``)."""
    n_clients = scenario["data"]["num_clients"]
    c = scenario["compression"]
    dense = results.get("dense")
    early_round = max(1, scenario["rounds"] // 10)
    seeds = sorted({s for r in results.values() for s in r["seeds"]})
    lines = [
        begin,
        f"## DGC on `{scenario['model']['name']}` / {scenario['data']['dataset']}, data-parallel mode "
        f"(`{scenario['name']}`, {scenario['rounds']:,} rounds)",
        "",
        (
            f"`bench/dgc_repro.py --scenario scenarios/{scenario['name']}.yaml`: {n_clients} workers, "
            f"{scenario['data']['partition']} split, `{scenario['model']['name']}`, one SGD step per round with worker "
            f"batch {scenario['client']['batch_size']} (total {n_clients * scenario['client']['batch_size']}), lr "
            f"{scenario['client']['lr']}, momentum {c['momentum']}, {scenario['rounds']} rounds, every worker every "
            f"round, server lr 1; seeds {', '.join(map(str, seeds))}. DGC: density {c['density']}, warm-up over "
            f"{c['warmup_rounds']} rounds, clip_norm {c['clip_norm']} (update units, ×N^-1/2 per worker), sample_ratio "
            f"{c['sample_ratio']}. Test set: "
            + (f"the first {scenario['data']['max_test_samples']} test samples" if scenario["data"].get("max_test_samples")
               else "the full test set")
            + f", evaluated every {scenario['eval']['every']} rounds." + (f" {written}" if written else "")
        ),
        "",
        (
            "Mean ± sample std over the seeds (n = seeds). *acc.*: next-sample accuracy after the last round; "
            "*loss*: mean test cross-entropy (nats); *ppl*: exp(loss), the paper's perplexity (here per character); "
            f"*last 3*: mean of the last three evaluations; *plateau*: mean of the evaluations over the second half "
            f"of the rounds (after round {scenario['rounds'] // 2}); *slope*: their least-squares slope, in points per "
            f"1,000 rounds (about 0 at a plateau); *early*: accuracy at round {early_round}; ratio: dense fp32 "
            "reply bytes / actual reply bytes on the wire (Flower messages), after the warm-up; *clipped*: share of "
            "worker updates the server clipped (dense baseline only; DGC clips on the worker and does not report it); "
            "*train loss first / last 10%*: the workers' mean training loss over the first and the last tenth of the "
            "rounds (every round, so less noisy than the few evaluations; the first tenth is the warm-up); "
            "*max train loss*: the largest round train loss after the first tenth (a spike marks an explosion); "
            "*wall s, last process*: the summary's wall time, which for a run resumed from a checkpoint is only "
            "the part after its last resume."
        ),
        "",
        "| variant | n | acc. % | Δ acc. vs dense (pp) | loss | ppl | last 3 % | plateau % | Δ plateau vs dense (pp) | "
        "slope (pp / 1,000 rounds) | "
        "early % | ratio after warm-up | B per upload after warm-up | train loss first 10% | train loss last 10% | "
        "max train loss | clipped | wall s, last process | paper's claim |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        n = r["n"]
        delta = "–" if dense is None else f"{100 * (r['final_accuracy'] - dense['final_accuracy']):+.2f}"
        plateau_delta = ("–" if dense is None or r["plateau_accuracy"] is None or dense["plateau_accuracy"] is None
                         else f"{100 * (r['plateau_accuracy'] - dense['plateau_accuracy']):+.2f}")
        shown = f"`{name}`" + (f" (partial: {r['rounds']} rounds)" if r["partial"] else "")
        lines.append(
            f"| {shown} | {n} | {fmt(r['final_accuracy'], r['final_accuracy_std'], n, 100)} | {delta} | "
            f"{fmt(r['final_loss'], r['final_loss_std'], n, 1, 3)} | {fmt(r['perplexity'], r['perplexity_std'], n)} | "
            f"{fmt(r['mean_last3_accuracy'], r['mean_last3_accuracy_std'], n, 100)} | "
            f"{fmt(r['plateau_accuracy'], r['plateau_accuracy_std'], n, 100)} | {plateau_delta} | "
            f"{fmt(r['plateau_slope'], r['plateau_slope_std'], n, 100_000)} | "
            f"{fmt(r['early_accuracy'], r['early_accuracy_std'], n, 100)} | "
            f"{fmt(r['ratio_after_warmup'], r['ratio_after_warmup_std'], 1, 1, 1)}× | "
            f"{r['upload_bytes_per_message_after_warmup']:,.0f} | "
            f"{fmt(r['early_train_loss'], r['early_train_loss_std'], n, 1, 3)} | "
            f"{fmt(r['late_train_loss'], r['late_train_loss_std'], n, 1, 3)} | "
            f"{fmt(r['max_train_loss'], r['max_train_loss_std'], n, 1, 2)} | {100 * r['clipped_share']:.1f}% | "
            f"{fmt(r['wall_time_s'], r['wall_time_s_std'], n, 1, 0)} | {PAPER.get(name, '')} |"
        )
    verdict = figures(results, c["density"]).get("verdict")
    if verdict:
        lines += ["", verdict]
    lines += ["", "Overrides per variant (`--set`, on top of " + (" ".join(f"`{s}`" for s in base_sets) or "nothing")
              + " and `seed=S`):", ""]
    for name in results:
        lines.append(f"* `{name}`: " + (" ".join(f"`{s}`" for s in sets[name]) or "(none: the scenario as written)"))
    if plot:
        lines += ["", f"![accuracy curves, mean over seeds]({plot})"]
    lines += ["", "Accuracy curves, mean over seeds (round: accuracy %):", ""]
    for name, r in results.items():
        lines.append(f"* `{name}`: " + ", ".join(f"{rnd}: {100 * a:.2f}" for rnd, a in r["accuracy_curve"]))
    lines.append(end)
    return "\n".join(lines)


def write_plot(results: dict[str, dict], per_run: dict[str, dict[int, dict]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, (name, r) in enumerate(results.items()):
        color = f"C{i}"
        for run in per_run[name].values():
            xs, ys = zip(*run["accuracy_curve"])
            ax.plot(xs, [100 * y for y in ys], color=color, alpha=0.3, linewidth=0.8, marker=".")
        if r["accuracy_curve"]:
            xs, ys = zip(*r["accuracy_curve"])
            ax.plot(xs, [100 * y for y in ys], color=color, label=f"{name} (n={r['n']})", linewidth=1.8, marker="o")
        curves = [run["train_loss_curve"] for run in per_run[name].values() if run["train_loss_curve"]]
        if curves:
            length = min(len(c) for c in curves)
            mean = [statistics.fmean(c[t] for c in curves) for t in range(length)]
            w = max(1, length // 30)  # moving average over w rounds
            smooth = [statistics.fmean(mean[max(0, t - w + 1):t + 1]) for t in range(length)]
            bx.plot(range(1, length + 1), smooth, color=color, label=name, linewidth=1.2)
    ax.set_xlabel("round (one SGD step per worker)")
    ax.set_ylabel("test accuracy %")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    bx.set_xlabel("round")
    bx.set_ylabel("train loss (mean over seeds, moving average)")
    bx.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _strict(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def figures(results: dict[str, dict], density: float | None = None) -> dict:
    """The last line's JSON: per-variant means and stds (no curves), and the verdict on DGC against dense
    (``density``: DGC's, for the verdict's words)."""
    out: dict = {}
    for name, r in results.items():
        out[name] = {k: r[k] for k in ("n", "seeds", "rounds", "partial")}
        for key in STAT_KEYS:
            out[name][key] = r[key]
            out[name][f"{key}_std"] = r[f"{key}_std"]
    out = _strict(out)  # strict JSON: NaN and infinities become null
    dense, dgc = results.get("dense"), results.get("dgc")
    if dense and dgc:
        final = 100 * (dgc["final_accuracy"] - dense["final_accuracy"])
        out["dgc_minus_dense_pp"] = final
        if dgc["plateau_accuracy"] is not None and dense["plateau_accuracy"] is not None:
            d = 100 * (dgc["plateau_accuracy"] - dense["plateau_accuracy"])
            out["dgc_minus_dense_plateau_pp"] = d
            out["dgc_within_1pp"] = d >= -1.0
            n = min(dgc["n"], dense["n"])
            out["verdict"] = (
                ("(partial runs: no verdict yet) " if dgc["partial"] or dense["partial"] else "")
                + "**DGC within 1 pp of dense"
                + (f" at {100 * (1 - density):.1f}% sparsity" if density is not None else "") + ": "
                f"{'yes' if d >= -1.0 else 'no'}** — plateau accuracy (mean of each run's evaluations over the "
                f"second half of the rounds, then over n = {n} seeds) {100 * dgc['plateau_accuracy']:.2f} % for DGC "
                f"against {100 * dense['plateau_accuracy']:.2f} % for dense: {d:+.2f} pp (at the last evaluation "
                f"alone: {final:+.2f} pp).")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "scenarios" / "dgc_shakespeare.yaml"))
    parser.add_argument("--seeds", default=None, help="comma-separated seeds (default: the scenario's)")
    parser.add_argument("--out", help="runs folder (default runs/bench-<scenario name>)")
    parser.add_argument("--rounds", type=int, help="override the scenario's rounds")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="extra KEY=VALUE for every run")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel (processes)")
    parser.add_argument("--only", nargs="*", help="run only these variants (dense and dgc are always kept)")
    parser.add_argument("--extra", action="store_true", help="also dense_no_clipping, no_momentum_correction_no_momentum")
    parser.add_argument("--dense-clip", choices=("auto", "on", "off"), default="auto",
                        help="clip the dense baseline's worker updates at clip_norm/sqrt(N) (auto: when the scenario clips)")
    parser.add_argument("--rerun", action="store_true", help="run again even where a finished run exists")
    parser.add_argument("--partial", action="store_true", help="run nothing; report the runs so far")
    parser.add_argument("--write", action="store_true", help="write the block into --results and the plot")
    parser.add_argument("--results", default=str(REPO / "docs" / "results.md"))
    parser.add_argument("--block", help="the block's name in --results and the plot's (default: the scenario's name)")
    args = parser.parse_args(argv)

    from fedgc.scenario.model import load_tree, parse_override, set_dotted, validate

    data_dir = Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared")) / "data"
    os.environ.setdefault("FEDGC_DATA_DIR", str(data_dir.resolve()))  # the scenarios' ${FEDGC_DATA_DIR}
    scenario_path = Path(args.scenario).resolve()
    tree = load_tree(scenario_path)
    base_sets = list(args.sets)
    if args.rounds:
        base_sets.append(f"rounds={args.rounds}")
    for s in base_sets:
        set_dotted(tree, *parse_override(s))
    scenario = validate(tree).model_dump(mode="json")  # defaults filled in
    name = scenario["name"]
    block = args.block or name
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", block):
        parser.error(f"--block {block!r}: 1 to 64 letters, digits, _ and -")
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [scenario["seed"]]
    out = Path(args.out or REPO / "runs" / f"bench-{name}")
    dense_clip = args.dense_clip == "on" or (args.dense_clip == "auto" and scenario["compression"]["clip_norm"])
    todo = variants(scenario["compression"], scenario["data"]["num_clients"], bool(dense_clip), args.extra)
    if args.only:
        todo = {k: v for k, v in todo.items() if k in args.only or k in ("dense", "dgc")}
    jobs = [(seed, v) for seed in seeds for v in todo]  # seed-major: a cut-short bench has whole seeds
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            (seed, v): pool.submit(run_one, scenario_path, out / f"seed{seed}" / v,
                                   [*base_sets, f"seed={seed}", *todo[v]], scenario["rounds"], args.rerun, args.partial)
            for seed, v in jobs
        }
        per_run: dict[str, dict[int, dict]] = {v: {} for v in todo}
        for (seed, v), f in futures.items():
            r = f.result()
            if r is not None:
                per_run[v][seed] = r
    results = {v: aggregate(runs) for v, runs in per_run.items() if runs}
    if args.write:
        begin, end = f"<!-- {block}-repro:begin -->", f"<!-- {block}-repro:end -->"
        results_path = Path(args.results)
        plot_rel = f"img/{block}_accuracy.png"
        write_plot(results, per_run, results_path.parent / plot_rel,
                   f"{scenario['model']['name']} / {scenario['data']['dataset']}: dense vs DGC, {len(seeds)} seeds")
        write_block(results_path, begin, end, render(results, scenario, todo, base_sets, begin, end, plot_rel,
                                                       provenance()))
    print(json.dumps(figures(results, scenario["compression"]["density"]), allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
