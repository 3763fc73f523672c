"""The clients' update norms before and after local clipping, per block of rounds, read from runs made
with ``client.report_norms: true`` (each applied update's norms are in the run's ``clients.jsonl``).

    .venv/bin/python bench/update_norms.py RUN_DIR [RUN_DIR ...] [--blocks 5] [--last 5]

For each run folder: per block of rounds (``--blocks`` equal parts of the run), the 10th, 50th and 90th
percentile and the largest L2 norm of the applied updates before clipping, the median after clipping,
the share of updates local clipping scaled down, and the mean round train loss; then the run's last
evaluation and the mean of its last ``--last`` evaluations (accuracy, test loss, perplexity = exp of
the loss). Norms are in update units, Δ = w_global − w_local (lr × gradient for one plain SGD step).
Prints a markdown table per run and one JSON object on its last line: per run its blocks and its
evaluation figures. A run folder without reported norms is refused in one line.

Producing such runs: any scenario with ``--set client.report_norms=true``, e.g. (docs/results.md)

    .venv/bin/python -m fedgc run scenarios/shakespeare_lstm.yaml --set client.report_norms=true \\
        --set rounds=200 --set eval.every=10 --out runs/norms-dgc
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedgc.runs.metrics import MetricsFileError, read_metrics

MAX_LINES = 10_000_000  # clients.jsonl lines read per run: a bound before the loop


def client_norms(run: Path) -> list[tuple[int, float, float]]:
    """(round, norm before, norm after) of each applied update that reported its norms."""
    out = []
    with (run / "clients.jsonl").open() as lines:
        for count, line in enumerate(lines):
            if count >= MAX_LINES:
                raise ValueError(f"{run}/clients.jsonl has more than {MAX_LINES:,} lines")
            row = json.loads(line)
            if row.get("outcome") == "applied" and row.get("norm_before_clip") is not None:
                out.append((int(row["round"]), float(row["norm_before_clip"]), float(row["norm_after_clip"])))
    return out


def summarize(run: Path, blocks: int, last: int) -> dict:
    rounds = read_metrics(run / "metrics.jsonl")
    norms = client_norms(run)
    if not norms:
        raise ValueError(f"{run}: no reported norms in clients.jsonl (run it with --set client.report_norms=true)")
    n = max(r["round"] for r in rounds)
    table = []
    for i in range(blocks):
        lo, hi = i * n // blocks + 1, (i + 1) * n // blocks
        before = np.array([b for r, b, _ in norms if lo <= r <= hi])
        after = np.array([a for r, _, a in norms if lo <= r <= hi])
        losses = [r["train_loss"] for r in rounds if lo <= r["round"] <= hi and r["train_loss"] is not None]
        if not before.size:
            continue
        table.append({"rounds": [lo, hi], "updates": int(before.size),
                      "p10": float(np.percentile(before, 10)), "median": float(np.median(before)),
                      "p90": float(np.percentile(before, 90)), "max": float(before.max()),
                      "median_after": float(np.median(after)),
                      "clipped_share": float(np.mean(after < before * (1 - 1e-6))),
                      "train_loss": float(np.mean(losses)) if losses else None})
    evals = [(r["round"], r["accuracy"], r["loss"]) for r in rounds if r["accuracy"] is not None]
    tail = evals[-last:]
    mean_loss = float(np.mean([e[2] for e in tail])) if tail else None
    return {"rounds": n, "blocks": table,
            "final": {"round": evals[-1][0], "accuracy": evals[-1][1], "loss": evals[-1][2],
                      "perplexity": math.exp(evals[-1][2])} if evals else None,
            "last_evals": {"n": len(tail), "accuracy": float(np.mean([e[1] for e in tail])), "loss": mean_loss,
                           "perplexity": math.exp(mean_loss)} if tail else None}


def markdown(name: str, s: dict) -> str:
    head = ("| rounds | updates | p10 | median | p90 | max | median after clipping | clipped | train loss |\n"
            "|---|---|---|---|---|---|---|---|---|")
    rows = [f"| {b['rounds'][0]}–{b['rounds'][1]} | {b['updates']} | {b['p10']:.3f} | {b['median']:.3f} | "
            f"{b['p90']:.3f} | {b['max']:.3f} | {b['median_after']:.3f} | {b['clipped_share']:.0%} | "
            f"{'–' if b['train_loss'] is None else format(b['train_loss'], '.3f')} |" for b in s["blocks"]]
    ends = ""
    if s["final"]:
        f, t = s["final"], s["last_evals"]
        ends = (f"\nround {f['round']}: accuracy {f['accuracy']:.2%}, loss {f['loss']:.3f} (ppl {f['perplexity']:.2f}); "
                f"mean of the last {t['n']} evaluations: {t['accuracy']:.2%}, loss {t['loss']:.3f} "
                f"(ppl {t['perplexity']:.2f})")
    return f"**{name}** ({s['rounds']} rounds)\n\n{head}\n" + "\n".join(rows) + ends + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run folders made with client.report_norms: true")
    parser.add_argument("--blocks", type=int, default=5, choices=range(1, 101), metavar="1..100")
    parser.add_argument("--last", type=int, default=5, choices=range(1, 1001), metavar="1..1000")
    args = parser.parse_args()
    out = {}
    for run in map(Path, args.runs):
        try:
            out[run.name] = summarize(run, args.blocks, args.last)
        except (OSError, ValueError, KeyError, MetricsFileError) as err:
            print(f"update_norms: {str(err).splitlines()[0]}", file=sys.stderr)
            return 2
        print(markdown(run.name, out[run.name]))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
