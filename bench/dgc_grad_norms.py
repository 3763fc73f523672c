"""Per-worker gradient norms, before and after local clipping, along a data-parallel scenario's dense
trajectory: the data behind "clipping is needed for RNNs".

    .venv/bin/python bench/dgc_grad_norms.py --scenario scenarios/dgc_shakespeare.yaml [--rounds N] [--seed S]

Replays the scenario's dense baseline outside the simulator (plain PyTorch, same data split, model,
initial weights, worker batch and lr): N workers each compute the gradient of one minibatch at the
global weights, each gradient is clipped at the per-worker threshold DGC uses (``clip_norm / (lr·√N)``
in gradient units, see docs/dgc.md), the mean is applied with momentum SGD. Per round it records each
worker's gradient L2 norm before clipping and after. Prints a table of norm percentiles per block of
rounds and one JSON object on its last line. The minibatches are drawn here, not by the simulator's
client generators, so the trajectory is the dense baseline's in distribution, not bit for bit.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "scenarios" / "dgc_shakespeare.yaml"))
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--blocks", type=int, default=5, help="blocks of rounds in the table")
    args = parser.parse_args(argv)
    os.environ.setdefault("FEDGC_DATA_DIR", str((REPO.parent / "shared" / "data").resolve()))

    from fedgc.data import load_federated
    from fedgc.data.config import DataConfig
    from fedgc.models import build_model
    from fedgc.scenario.model import load_tree, validate

    s = validate(load_tree(args.scenario))
    seed = s.seed if args.seed is None else args.seed
    rounds = args.rounds or s.rounds
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    data = load_federated(DataConfig(**s.data.model_dump()), seed)
    model = build_model(s.model.name, data.input_shape, data.num_classes, seed, s.model.options)
    n, lr, batch = len(data.partitions), s.client.lr, s.client.batch_size
    threshold = s.compression.clip_norm / (lr * math.sqrt(n)) if s.compression.clip_norm else math.inf
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=s.compression.momentum)
    params = list(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    gen = np.random.default_rng([seed, 7])
    parts = [p.tensors(torch.device("cpu")) for p in data.partitions]
    before, after, losses = np.zeros((rounds, n)), np.zeros((rounds, n)), np.zeros(rounds)
    start = time.time()
    for t in range(rounds):
        total = [torch.zeros_like(p) for p in params]
        for k, (x, y) in enumerate(parts):
            index = torch.as_tensor(gen.integers(0, len(y), batch))
            model.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[index]), y[index])
            loss.backward()
            norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)))
            scale = min(1.0, threshold / (norm + 1e-6))
            before[t, k], after[t, k] = norm, norm * scale
            losses[t] += float(loss.detach()) / n
            for acc, p in zip(total, params):
                acc.add_(p.grad, alpha=scale / n)
        for p, g in zip(params, total):
            p.grad = g
        optimizer.step()
    wall = time.time() - start
    edges = np.linspace(0, rounds, args.blocks + 1).astype(int)
    blocks = []
    print(f"per-worker gradient L2 norm (gradient units), threshold {threshold:.4g} = clip_norm "
          f"{s.compression.clip_norm} / (lr {lr} · √{n})", file=sys.stderr)
    print("| rounds | p10 | median | p90 | p99 | max | clipped | mean after clipping | train loss |", file=sys.stderr)
    for a, b in itertools.pairwise(edges):
        pre = before[a:b].ravel()
        row = {"rounds": [int(a) + 1, int(b)], "p10": float(np.percentile(pre, 10)),
               "median": float(np.median(pre)), "p90": float(np.percentile(pre, 90)),
               "p99": float(np.percentile(pre, 99)), "max": float(pre.max()),
               "clipped_share": float((pre > threshold).mean()), "mean_after": float(after[a:b].mean()),
               "train_loss": float(losses[a:b].mean())}
        blocks.append(row)
        print(f"| {a + 1}–{b} | {row['p10']:.3f} | {row['median']:.3f} | {row['p90']:.3f} | {row['p99']:.3f} | "
              f"{row['max']:.3f} | {100 * row['clipped_share']:.1f}% | {row['mean_after']:.3f} | "
              f"{row['train_loss']:.3f} |", file=sys.stderr)
    print(json.dumps({"threshold": threshold, "rounds": rounds, "workers": n, "seed": seed, "lr": lr,
                      "clipped_share": float((before > threshold).mean()), "max_norm": float(before.max()),
                      "median_norm": float(np.median(before)), "blocks": blocks, "wall_s": wall}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
