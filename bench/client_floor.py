"""What a client-round's own work costs at its floor on this CPU, and whether batching a round's
clients lowers it.

A round of ``--clients`` clients of ``mnist_2nn`` (199,210 parameters) with DGC at density 0.01 (the
``xdev_step`` workload of ``bench/round_cost.py``), side by side in one process, each client's own
momentum u, velocity v and update Δ (float32, together 2.4 MB a client):

- ``dgc``: DGC's arithmetic and nothing else: momentum correction (u ← m·u + Δ, v ← v + u), the
  threshold ranked on a sample of 1% of |v| (exact top-k where that is 1,000 entries or more of a
  tensor), the entries of |v| at or above it taken and zeroed in v and u (the residual, momentum
  masking); the biases sent whole (``dense_small_tensors``). Written four ways: numpy and torch, each
  one client a call (``one_by_one``, every client's own state, client after client, as a round runs
  them) and the round's clients in one call (``batched``: the same arithmetic on clients × parameters
  matrices, as a batched engine would run it). Their ratio says what batching the compression of a
  round's clients buys on this machine.
- ``fedgc_compress``: fedgc's own ``compress_update`` of each client (``DGCMemory`` restored from the
  same u and v, ``DGC``, the checks, the sent update its pending state keeps), client after client, on
  the same inputs: against ``dgc`` numpy one by one, what fedgc's compression costs over the arithmetic.
- ``fedgc_state``: the ClientApp's keeping of that client's state between rounds: its memory (u, v)
  and its pending update packed into Flower records (``pack_state``) and unpacked with the checks a
  restored state gets (``unpack_state``), against ``state_copies``: the same bytes copied out of the
  tensors and back into new ones, nothing else.
- ``training``: the bare training of each client (load the global weights, ``--steps`` SGD steps of
  batch 10 on its 60 examples, Δ), client after client, ``warm`` and ``cold``: cold writes
  ``--scrub-mb`` of memory between two clients, outside the timed part, as a round's other work (the
  client's state read and written, its two messages) leaves the caches to the next client's training.

Times are per client in milliseconds, medians of ``--reps`` interleaved repetitions. The last line
printed is one JSON object: ``per_client_ms`` (each figure), ``batched_over_one_by_one`` (numpy,
torch), ``fedgc_compress_over_floor``, ``fedgc_state_over_copies`` and ``training_cold_over_warm``; ``--write`` puts the table in
docs/performance.md (``<!-- client_floor:begin -->``).

    python bench/client_floor.py [--clients 100] [--reps 5] [--steps 1] [--scrub-mb 4] [--write]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from fedgc.compress.dgc import MIN_SAMPLES  # a sample this large or larger is the whole tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
REPO = Path(__file__).resolve().parents[1]
DENSITY = 0.01
SAMPLE_RATIO = 0.01
MOMENTUM = 0.9
EXAMPLES = 60  # a client's examples (the xdev population's mean partition is about 60)
BATCH = 10


class Round:
    """The round's clients: their states and updates as clients × parameters matrices (a client's
    row is its own memory), and the model's layout (one ``(name, shape, start, stop)`` a tensor)."""

    def __init__(self, clients: int, seed: int = 0) -> None:
        from fedgc.models import build_model

        self.model = build_model("mnist_2nn", (1, 28, 28), 10, seed)
        self.layout, start = [], 0
        for name, tensor in self.model.state_dict().items():
            self.layout.append((name, tuple(tensor.shape), start, start + tensor.numel()))
            start += tensor.numel()
        self.numel = start
        rng = np.random.default_rng(seed)
        self.delta = rng.standard_normal((clients, start), dtype=np.float32) * np.float32(0.01)
        self.u = rng.standard_normal((clients, start), dtype=np.float32) * np.float32(0.01)
        self.v = rng.standard_normal((clients, start), dtype=np.float32) * np.float32(0.01)
        self.clients = clients


def dgc_numpy(u: np.ndarray, v: np.ndarray, delta: np.ndarray, layout, rng: np.random.Generator) -> list:
    """DGC on the rows of ``u``, ``v`` (changed in place) for update rows ``delta``; what is sent."""
    np.multiply(u, np.float32(MOMENTUM), out=u)
    u += delta
    v += u
    sent = []
    for _, shape, lo, hi in layout:
        vl, ul, n = v[:, lo:hi], u[:, lo:hi], hi - lo
        if len(shape) <= 1:
            sent.append(vl.copy())
            vl[...] = 0
            continue
        k = max(1, math.ceil(DENSITY * n))
        samples = min(n, max(MIN_SAMPLES, math.ceil(SAMPLE_RATIO * n)))
        if samples >= n:
            top = np.argpartition(np.abs(vl), n - k, axis=1)[:, n - k:]
            rows = np.repeat(np.arange(vl.shape[0]), k)
            cols = top.reshape(-1)
        else:
            picks = rng.integers(0, n, (vl.shape[0], samples))
            sample = np.abs(np.take_along_axis(vl, picks, axis=1))
            rank = max(1, math.ceil(samples * k / n))
            sample.partition(samples - rank, axis=1)
            threshold = sample[:, samples - rank:].min(axis=1)
            rows, cols = np.nonzero(np.abs(vl) >= threshold[:, None])
        values = vl[rows, cols]
        vl[rows, cols] = 0
        ul[rows, cols] = 0
        sent.append((rows, cols, values))
    return sent


def dgc_torch(u: torch.Tensor, v: torch.Tensor, delta: torch.Tensor, layout, generator: torch.Generator) -> list:
    """``dgc_numpy`` with torch operators (what a GPU would run)."""
    u.mul_(MOMENTUM).add_(delta)
    v.add_(u)
    sent = []
    for _, shape, lo, hi in layout:
        vl, ul, n = v[:, lo:hi], u[:, lo:hi], hi - lo
        if len(shape) <= 1:
            sent.append(vl.clone())
            vl.zero_()
            continue
        k = max(1, math.ceil(DENSITY * n))
        samples = min(n, max(MIN_SAMPLES, math.ceil(SAMPLE_RATIO * n)))
        if samples >= n:
            cols = vl.abs().topk(k, dim=1).indices
            rows = torch.arange(vl.shape[0]).unsqueeze(1).expand(-1, k)
            rows, cols = rows.reshape(-1), cols.reshape(-1)
        else:
            picks = torch.randint(n, (vl.shape[0], samples), generator=generator)
            rank = max(1, math.ceil(samples * k / n))
            threshold = vl.gather(1, picks).abs().topk(rank, dim=1, sorted=False).values.min(dim=1).values
            rows, cols = (vl.abs() >= threshold.unsqueeze(1)).nonzero(as_tuple=True)
        values = vl[rows, cols]
        vl[rows, cols] = 0
        ul[rows, cols] = 0
        sent.append((rows, cols, values))
    return sent


def time_dgc(state: Round, way: str, batched: bool) -> float:
    """Seconds for the round's clients (their states changed in place, as rounds would)."""
    rng, generator = np.random.default_rng(1), torch.Generator().manual_seed(1)
    step = state.clients if batched else 1
    start = time.perf_counter()
    for i in range(0, state.clients, step):
        rows = slice(i, i + step)
        if way == "numpy":
            dgc_numpy(state.u[rows], state.v[rows], state.delta[rows], state.layout, rng)
        else:
            dgc_torch(torch.from_numpy(state.u[rows]), torch.from_numpy(state.v[rows]),
                      torch.from_numpy(state.delta[rows]), state.layout, generator)
    return time.perf_counter() - start


def time_fedgc_client(state: Round) -> dict[str, float]:
    """Seconds of fedgc's ``compress_update`` of each client from its u and v (``fedgc_compress``: the call
    alone), and of packing and unpacking the state it leaves (``fedgc_state``), summed over the clients."""
    from fedgc.compress.base import CompressionContext
    from fedgc.compress.config import CompressionConfig
    from fedgc.compress.dgc_memory import MOMENTUM_KEY, VELOCITY_KEY
    from fedgc.compress.update import build_compression, compress_update
    from fedgc.flower.state.client_state import pack_state, unpack_state

    config = CompressionConfig(name="dgc", density=DENSITY, momentum=MOMENTUM, sample_ratio=SAMPLE_RATIO)
    generator = torch.Generator().manual_seed(1)
    total = keeping = 0.0
    for i in range(state.clients):
        def tensors(row: np.ndarray) -> dict[str, torch.Tensor]:
            return {name: torch.from_numpy(row[lo:hi]).view(shape) for name, shape, lo, hi in state.layout}
        compressor, memory = build_compression(config)
        u, v = tensors(state.u[i]), tensors(state.v[i])
        memory.load_state_dict({**{MOMENTUM_KEY + k: t for k, t in u.items()},
                                **{VELOCITY_KEY + k: t for k, t in v.items()}})
        delta = tensors(state.delta[i])
        ctx = CompressionContext(round=2, density=DENSITY, generator=generator, num_clients=state.clients)
        start = time.perf_counter()
        compressed = compress_update(delta, compressor, memory, ctx, dense_small_tensors=True, value_dtype="fp32")
        total += time.perf_counter() - start
        start = time.perf_counter()  # the ClientApp's _store_tensors, then the next round's _load_tensors
        records = (pack_state(memory.state_dict()), pack_state({f"2/{k}": t for k, t in compressed.sent.items()}))
        for record in records:
            unpack_state(record, state.numel)
        keeping += time.perf_counter() - start
        new = memory.state_dict()
        for name, _, lo, hi in state.layout:  # the client's state moves on, as a round leaves it
            state.u[i, lo:hi] = new[MOMENTUM_KEY + name].reshape(-1).numpy()
            state.v[i, lo:hi] = new[VELOCITY_KEY + name].reshape(-1).numpy()
    return {"fedgc_compress": total, "fedgc_state": keeping}


def time_state_copies(state: Round) -> float:
    """Seconds for each client's u and v copied out of their tensors into bytes and back into new arrays."""
    start = time.perf_counter()
    for i in range(state.clients):
        for rows in (state.u, state.v):
            np.frombuffer(rows[i].tobytes(), dtype=np.float32).copy()
    return time.perf_counter() - start


def time_training(state: Round, data: list, steps: int, scrub: np.ndarray | None) -> float:
    """Seconds of the clients' bare training (each timed alone; ``scrub`` written between two clients)."""
    import copy

    import torch.nn.functional as F

    worker = copy.deepcopy(state.model)
    start_weights = {k: v.clone() for k, v in state.model.state_dict().items()}
    params = list(worker.parameters())
    generator = torch.Generator().manual_seed(0)
    junk = None if scrub is None else np.empty_like(scrub)
    total = 0.0
    for x, y in data:
        if scrub is not None:
            np.copyto(junk, scrub)
        t0 = time.perf_counter()
        worker.load_state_dict(start_weights)
        order = torch.randperm(len(y), generator=generator)
        for s in range(steps):
            index = order[(s * BATCH) % len(y):(s * BATCH) % len(y) + BATCH]
            for p in params:
                p.grad = None
            F.cross_entropy(worker(x[index]), y[index]).backward()
            with torch.no_grad():
                for p in params:
                    p.add_(p.grad, alpha=-0.05)
        with torch.no_grad():
            {n: start_weights[n] - p for n, p in worker.named_parameters()}  # the client's Δ
        total += time.perf_counter() - t0
    return total


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100, help="clients a round")
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions (medians are reported)")
    parser.add_argument("--steps", type=int, default=1, help="local SGD steps of batch 10 a client")
    parser.add_argument("--scrub-mb", type=float, default=4.0,
                        help="memory written between two clients for the cold training (a client-round's "
                             "other data: its 1.6 MB DGC state read and written, its messages)")
    parser.add_argument("--write", action="store_true", help="write the table into docs/performance.md")
    parser.add_argument("--doc", default=str(REPO / "docs" / "performance.md"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 1000 or not 1 <= args.reps <= 100 or not 1 <= args.steps <= 100:
        parser.error("--clients must be 1 to 1000, --reps 1 to 100, --steps 1 to 100")
    if not 0 < args.scrub_mb <= 1024:
        parser.error("--scrub-mb must be above 0 and at most 1024")
    torch.set_num_threads(1)
    state = Round(args.clients)
    data_rng = torch.Generator().manual_seed(2)
    data = [(torch.randn(EXAMPLES, 1, 28, 28, generator=data_rng), torch.randint(10, (EXAMPLES,), generator=data_rng))
            for _ in range(args.clients)]
    scrub = np.ones(int(args.scrub_mb * 2**20), dtype=np.uint8)
    cases = [  # each gives {figure: seconds for the round's clients}
        lambda: {"dgc_numpy_one_by_one": time_dgc(state, "numpy", batched=False)},
        lambda: {"dgc_numpy_batched": time_dgc(state, "numpy", batched=True)},
        lambda: {"dgc_torch_one_by_one": time_dgc(state, "torch", batched=False)},
        lambda: {"dgc_torch_batched": time_dgc(state, "torch", batched=True)},
        lambda: time_fedgc_client(state),  # fedgc_compress and fedgc_state
        lambda: {"state_copies": time_state_copies(state)},
        lambda: {"training_warm": time_training(state, data, args.steps, None)},
        lambda: {"training_cold": time_training(state, data, args.steps, scrub)},
    ]
    for run in cases:  # warm-up: first calls allocate
        run()
    times: dict[str, list[float]] = {}
    for _ in range(args.reps):
        for run in cases:
            for name, seconds in run().items():
                times.setdefault(name, []).append(seconds)
    per_client = {name: round(1000 * statistics.median(t) / args.clients, 4) for name, t in times.items()}
    result = {
        "per_client_ms": per_client,
        "batched_over_one_by_one": {
            way: round(per_client[f"dgc_{way}_batched"] / per_client[f"dgc_{way}_one_by_one"], 2)
            for way in ("numpy", "torch")},
        "fedgc_compress_over_floor": round(per_client["fedgc_compress"] / per_client["dgc_numpy_one_by_one"], 2),
        "fedgc_state_over_copies": round(per_client["fedgc_state"] / per_client["state_copies"], 2),
        "training_cold_over_warm": round(per_client["training_cold"] / per_client["training_warm"], 2),
        "clients": args.clients, "parameters": state.numel, "steps": args.steps, "scrub_mb": args.scrub_mb,
        "reps": args.reps, "machine": machine(),
    }
    if args.write:
        from results_block import write_block

        begin, end = "<!-- client_floor:begin -->", "<!-- client_floor:end -->"
        write_block(Path(args.doc), begin, end, f"{begin}\n{table(result)}{end}")
    print(json.dumps(result))
    return result


def machine() -> dict:
    from results_block import commit

    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "numpy": np.__version__, "threads": torch.get_num_threads(), "commit": commit(REPO)}


def table(result: dict) -> str:
    """The figures as a markdown table, headed by what produced them."""
    m, ms = result["machine"], result["per_client_ms"]
    lines = [f"`bench/client_floor.py --clients {result['clients']} --reps {result['reps']} --steps "
             f"{result['steps']} --scrub-mb {result['scrub_mb']:g}`, commit {m['commit']}, {time.strftime('%Y-%m-%d')}, "
             f"CPU kernel set {m['cpu_capability']}, {m['threads']} torch thread, no GPU, torch {m['torch']}, "
             f"numpy {m['numpy']} (ms a client, medians):", "",
             "| | one client a call | the round's clients in one call | batched / one by one |",
             "|---|---|---|---|"]
    for way in ("numpy", "torch"):
        lines.append(f"| DGC's arithmetic, {way} | {ms[f'dgc_{way}_one_by_one']:.3f} | {ms[f'dgc_{way}_batched']:.3f} "
                     f"| {result['batched_over_one_by_one'][way]} |")
    lines += ["", "| | ms a client | ratio |", "|---|---|---|",
              f"| fedgc's `compress_update`, one client a call | {ms['fedgc_compress']:.3f} | "
              f"{result['fedgc_compress_over_floor']} × DGC's arithmetic in numpy |",
              f"| fedgc's `pack_state` and `unpack_state` of the client's memory and pending update | "
              f"{ms['fedgc_state']:.3f} | {result['fedgc_state_over_copies']} × copying u and v out and back |",
              f"| copying u and v out of their tensors and back | {ms['state_copies']:.3f} | |",
              f"| bare training, warm caches | {ms['training_warm']:.3f} | |",
              f"| bare training, {result['scrub_mb']:g} MB written between two clients | {ms['training_cold']:.3f} | "
              f"{result['training_cold_over_warm']} × warm |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
