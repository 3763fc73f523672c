"""Speed of the LSTM path: one round of ``char_lstm`` training, per client and vectorized, and DGC's share.

The round of ``scenarios/shakespeare_lstm.yaml`` (3 clients, 20 local steps of batch 10, lr 0.5, local
momentum 0.9; ``--clients``/``--steps`` to change it) on LEAF Shakespeare's first roles (from
``$FEDGC_SHARED_DIR/data/leaf-shakespeare``; random character sequences of the same shape when the
data is not there: timings do not depend on the characters), timed side by side in this process:

* ``bare_loop``: a plain PyTorch loop, client after client (the floor);
* ``fedgc_sequential``: ``fedgc.execution.run_sequential`` (what fedgc runs on a CPU);
* ``fedgc_vectorized``: ``fedgc.execution.run_vectorized`` on ``--vectorized-steps`` local steps (4:
  on a CPU it is much slower; ``vectorized_over_sequential`` compares per local step). If it cannot
  batch the model it says why in a one-line notice and trains sequentially; the bench records that
  notice (``vectorized_notice``) and whether it fell back;
* ``dgc_compress``: each client's Δ (on the training device, as in a client) through
  ``fedgc.compress.update.compress_update`` with DGC as the
  scenario configures it (density 0.01, clip_norm 10, no momentum correction) — clipping, residual,
  sampled top-k selection, decompression, memory update; ``dgc_select``: the sampled top-k selection
  alone (``sampled_topk_indices`` on the weight matrices, what ``compress`` does per matrix).

Shares: ``dgc_compress_share`` = dgc_compress / (fedgc_sequential + dgc_compress), the part of a
client round's time that compression takes, both on ``--device`` (on a GPU, compression on the GPU;
before 2026-11-27 the deltas were taken to the host and compression timed on one CPU thread);
``dgc_select_share`` the same for the selection alone.
Each case is warmed up once, then timed ``--reps`` times interleaved (median; ``*_min_s`` the fastest,
the better figure on a machine shared with other jobs). One thread (``--threads``). The last line is one
JSON object.

    OMP_NUM_THREADS=1 .venv/bin/python bench/lstm_round.py [--reps 3] [--clients 3] [--steps 20] [--device cpu]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
import torch.nn.functional as F

from fedgc.compress.base import CompressionContext
from fedgc.compress.dgc import DGC, DGCOptions, sampled_topk_indices
from fedgc.compress.topk import k_for
from fedgc.compress.update import compress_update
from fedgc.data.base import ArrayDataset
from fedgc.execution import TrainJob, resolve_device, run_sequential, run_vectorized, synchronize
from fedgc.models.lstm import CharLSTM

REPO = Path(__file__).resolve().parents[1]
SEQ, VOCAB = 80, 80


def client_data(clients: int, seed: int) -> tuple[list[ArrayDataset], str]:
    """The first ``clients`` LEAF Shakespeare roles, or random sequences shaped like them."""
    root = Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared")) / "data" / "leaf-shakespeare"
    try:
        from fedgc.data import load_federated
        from fedgc.data.config import DataConfig

        fd = load_federated(DataConfig(dataset="shakespeare", root=str(root), num_clients=10, partition="natural"), seed)
        return fd.partitions[:clients], "leaf-shakespeare"
    except Exception:  # noqa: BLE001 - no data here: synthetic sequences of the same shape
        rng = np.random.default_rng(seed)
        return [ArrayDataset(rng.integers(0, VOCAB, (800, SEQ)).astype(np.int64),
                             rng.integers(0, VOCAB, 800).astype(np.int64)) for _ in range(clients)], "synthetic"


def jobs_for(parts: list[ArrayDataset], steps: int, batch: int, lr: float, momentum: float) -> list[TrainJob]:
    return [TrainJob(data=p, steps=steps, batch_size=batch, lr=lr, momentum=momentum,
                     generator=torch.Generator().manual_seed(100 + i)) for i, p in enumerate(parts)]


def bare_loop(model: torch.nn.Module, start: dict, jobs: list[TrainJob], device: torch.device) -> None:
    worker = copy.deepcopy(model).to(device)
    for job in jobs:
        worker.load_state_dict(start)
        opt = torch.optim.SGD(worker.parameters(), lr=job.lr, momentum=job.momentum)
        x, y = torch.from_numpy(job.data.x).to(device), torch.from_numpy(job.data.y).to(device)
        order = torch.randperm(len(job.data), generator=job.generator)
        for s in range(job.steps):
            idx = order[(s * job.batch_size) % len(order):][:job.batch_size].to(device)
            opt.zero_grad()
            F.cross_entropy(worker(x[idx]), y[idx]).backward()
            opt.step()


def timed(fn, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--vectorized-steps", type=int, default=4,
                        help="local steps of the vectorized case (compared per step: on a CPU it is slow)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N | auto")
    parser.add_argument("--density", type=float, default=0.01)
    parser.add_argument("--clip-norm", type=float, default=10.0)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    torch.manual_seed(0)
    model = CharLSTM((SEQ,), VOCAB)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    parts, source = client_data(args.clients, 0)
    lr, momentum = 0.5, 0.9
    notices: list[str] = []
    deltas: list[dict[str, torch.Tensor]] = []

    def sequential() -> None:
        # Δ stays on the training device, as a client's does (client_app.local_update): compression and
        # its memory run there too, so on a GPU dgc_compress is timed on the GPU.
        deltas[:] = [r.delta for r in run_sequential(model, start, jobs_for(parts, args.steps, args.batch, lr, momentum),
                                                     device=device, out_device=device)]

    def vectorized() -> None:
        run_vectorized(model, start, jobs_for(parts, args.vectorized_steps, args.batch, lr, momentum), device=device,
                       notice=notices.append)

    options = DGCOptions(clip_norm=args.clip_norm, momentum_correction=False, momentum_masking=False)
    dgc = DGC.from_config(options)

    def dgc_compress() -> None:
        for i, delta in enumerate(deltas):
            ctx = CompressionContext(round=10, density=args.density, generator=torch.Generator().manual_seed(i),
                                     num_clients=len(deltas))
            compress_update(delta, dgc, DGC.make_memory(options), ctx)

    def dgc_select() -> None:
        for i, delta in enumerate(deltas):
            gen = torch.Generator().manual_seed(i)
            for t in delta.values():
                if t.dim() > 1:
                    flat = t.flatten()
                    sampled_topk_indices(flat, k_for(flat.numel(), args.density), options.sample_ratio, gen)

    cases = {"bare_loop": lambda: bare_loop(model, start, jobs_for(parts, args.steps, args.batch, lr, momentum), device),
             "fedgc_sequential": sequential, "fedgc_vectorized": vectorized,
             "dgc_compress": dgc_compress, "dgc_select": dgc_select}
    sequential()  # warm-up, and the deltas the compression cases use
    for name, fn in cases.items():
        if name != "fedgc_sequential":
            fn()
    warm_notices = list(notices)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.reps):
        for name, fn in cases.items():
            times[name].append(timed(fn, device))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    fell_back = any("unavailable" in n for n in warm_notices + notices)
    out = {f"{name}_s": round(v, 4) for name, v in med.items()}
    out.update({f"{name}_min_s": round(min(ts), 4) for name, ts in times.items()})
    seq = med["fedgc_sequential"]
    out.update({
        "per_client_s": round(seq / args.clients, 4),
        "per_step_ms": round(1e3 * seq / (args.clients * args.steps), 2),
        "fedgc_sequential_over_bare": round(seq / med["bare_loop"], 3),
        # per local step: the vectorized case runs --vectorized-steps, the others --steps
        "vectorized_over_sequential": round(med["fedgc_vectorized"] / args.vectorized_steps / (seq / args.steps), 3),
        "vectorized_steps": args.vectorized_steps,
        "vectorized_fell_back": fell_back,
        "vectorized_notice": (warm_notices + notices)[0] if (warm_notices + notices) else None,
        "dgc_compress_share": round(med["dgc_compress"] / (seq + med["dgc_compress"]), 4),
        "dgc_select_share": round(med["dgc_select"] / (seq + med["dgc_compress"]), 4),
        "dgc_compress_per_client_ms": round(1e3 * med["dgc_compress"] / args.clients, 2),
        "clients": args.clients, "steps": args.steps, "batch": args.batch, "reps": args.reps,
        "threads": args.threads, "device": str(device), "data": source,
        "params": sum(p.numel() for p in model.parameters()), "density": args.density,
        "torch": torch.__version__,
    })
    assert all(math.isfinite(v) for v in med.values())
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
