"""Benchmark: what a round costs against the training it simulates, side by side in one process.

For each workload, fedgc runs the scenario's rounds through the inline engine (``run_rounds``), and
the same number of clients is then trained by a bare PyTorch loop — the floor: the clients' own
partitions, the same model, local steps (or epochs), batch size and learning rate, one worker model
loaded with the global weights per client and a plain SGD step, its delta taken; clients in one
``torch.func`` vmapped step where fedgc vectorizes (``client.execution`` resolved as fedgc resolves
it), one after another otherwise. Both are timed in this process, one after the other, so their
ratio holds on a shared, noisy machine.

Workloads (``--workloads``, default all):

- ``xdev_step``: 100 clients a round of the 1,000-client ``mnist_2nn`` population of
  ``bench/population.py`` (MNIST, Dirichlet α = 0.5, DGC 1% with momentum correction and masking, the
  disk client-state store, ``lte`` links), one local step of batch 10;
- ``xdev_epoch``: the same with one local epoch (batch 10) per client;
- ``wide_1000``: 1,000 clients a round of the same population, one local step;
- ``lstm_dp``: the data-parallel ``scenarios/dgc_shakespeare.yaml`` round (4 clients, ``char_lstm``),
  after DGC's warm-up (``compression.warmup_rounds=0``: every timed round at density 0.001, as nearly
  every round of a long run is);
- ``lstm_dp_warmup``: the same round in DGC's warm-up (the scenario's 20 warm-up rounds: the timed
  rounds at densities 25% .. 0.4%, with ``--rounds`` up to 18);
- ``quickstart``: ``scenarios/quickstart.yaml`` (digits, 5 of 10 clients a round, 10 local steps).

A round's time is the interval between two consecutive rounds' ends (the run's observer), over
``--rounds`` rounds after the first; no evaluation falls in a timed round. ``startup_s`` is the run's
own start-up, from building the inline grid until its first round begins (data and partitions, loaded
once a process, so a workload sharing an earlier one's data shows none; model, network, strategy; the
process's imports are not in it: docs/performance.md, "What a process costs before it trains"),
``first_round_s`` the first round (one-time costs land there). ``bare_s`` is the median of
``--rounds`` repetitions of the bare loop. ``overhead_ms_per_client`` = (round − bare) / clients a
round. The split is ``bench/round_split.py``'s over the timed rounds.

    .venv/bin/python bench/round_cost.py [--workloads xdev_step,lstm_dp] [--rounds 3] [--device cpu|cuda]
    .venv/bin/python bench/round_cost.py --tiny      # a few clients a workload: the output's shape only
    .venv/bin/python bench/round_cost.py --write after   # also writes the table into docs/performance.md
    .venv/bin/python bench/round_cost.py --workloads xdev_step --store-thread off   # the disk store unthreaded

``--write LABEL`` writes the figures as a table into ``docs/performance.md`` between the markers
``<!-- round_cost:LABEL:begin -->`` and ``<!-- round_cost:LABEL:end -->``, with the date, the commit
(and whether ``fedgc/`` or ``bench/`` differ from it) and the machine (torch's CPU kernel set, the GPU).

The last line printed is one JSON object: one entry per workload, each with ``round_s``, ``bare_s``,
``round_over_bare``, ``overhead_ms_per_client``, ``startup_s``, ``first_round_s``, ``clients_per_round``, ``execution``,
``split_s`` and ``density`` (the timed rounds' lowest and highest upload density); and ``machine``
(torch's CPU kernel set, the device, the commit).
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared"))
WORKLOADS = ("xdev_step", "xdev_epoch", "wide_1000", "lstm_dp", "lstm_dp_warmup", "quickstart")


def population_tree(population: int, per_round: int, rounds: int, *, epochs: bool = False) -> dict:
    from population import scenario

    tree = scenario(population, per_round, rounds, "disk", str(SHARED / "data" / "mnist"))
    if epochs:
        tree["client"] = {"epochs": 1, "batch_size": 10, "lr": 0.05}
    return tree


def scenario_tree(name: str, rounds: int, tiny: bool) -> dict:
    """The workload's scenario, ``rounds`` rounds long, evaluated only after its last round."""
    import yaml

    population, per_round, wide = (40, 4, 40) if tiny else (1000, 100, 1000)
    if name == "xdev_step":
        tree = population_tree(population, per_round, rounds)
    elif name == "xdev_epoch":
        tree = population_tree(population, per_round, rounds, epochs=True)
    elif name == "wide_1000":
        tree = population_tree(population if tiny else wide, wide, rounds)
    else:
        lstm = name.startswith("lstm_dp")
        tree = yaml.safe_load((REPO / "scenarios" / f"{'dgc_shakespeare' if lstm else name}.yaml").read_text())
        if lstm:
            tree["data"]["root"] = str(SHARED / "data" / "leaf-shakespeare")
            # The rounds a long run is made of: at the scenario's density (0.001), not the warm-up's
            # 25% .. 0.4%, whose larger updates cost more to select, send and apply (the plateau run:
            # 1,300 warm-up rounds of 8,000 or more).
            if name == "lstm_dp":
                tree["compression"]["warmup_rounds"] = 0
        tree["rounds"] = rounds
        tree.setdefault("eval", {}).pop("target_accuracy", None)
    tree["eval"] = {**tree.get("eval", {}), "every": rounds}
    tree["checkpoint_every"] = 0
    return tree


class RoundClock:
    """Records when each round ends (an observer of the run), and snapshots the split's timers then."""

    def __init__(self, split) -> None:
        from fedgc.core.observe import RoundObserver

        clock = self

        class Observer(RoundObserver):
            def started(self, done) -> None:
                clock.began = time.perf_counter()

            def round_done(self, record, clients) -> None:
                clock.ends.append(time.perf_counter())
                clock.snapshots.append(dict(split.seconds))
                clock.densities.append(record.density)

        self.observer = Observer()
        self.began = 0.0  # when the run's parts were built and its first round began
        self.ends: list[float] = []
        self.snapshots: list[dict[str, float]] = []
        self.densities: list[float] = []  # each round's upload density (DGC's warm-up lowers it round by round)


def split_between(first: dict[str, float], last: dict[str, float], wall: float, rounds: int) -> dict[str, float]:
    """``bench/round_split.py``'s split of the rounds between two snapshots of its timers."""
    from round_split import RoundSplit

    view = RoundSplit.__new__(RoundSplit)
    view.seconds = {k: last.get(k, 0.0) - first.get(k, 0.0) for k in set(first) | set(last)}
    from collections import defaultdict

    view.seconds = defaultdict(float, view.seconds)
    return view.per_round(rounds, wall)


def fedgc_rounds(tree: dict, timed_rounds: int, device: str) -> dict:
    """Run the scenario inline; the start-up, and the time per round of rounds 2 .. 1 + timed_rounds."""
    from round_split import RoundSplit

    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.loop import run_rounds
    from fedgc.scenario.model import validate

    tree = {**tree, "device": device}
    scenario = validate(tree)
    t0 = time.perf_counter()  # the grid loads the data and partitions (once a process: cached)
    grid = InlineGrid.for_scenario(scenario)
    split = RoundSplit(grid)
    clock = RoundClock(split)
    summary = run_rounds(grid, scenario, None, observers=[clock.observer])
    ends = clock.ends
    if len(ends) < timed_rounds + 1:
        raise SystemExit(f"{scenario.name}: ran {len(ends)} rounds, {timed_rounds + 1} needed ({summary.stopped_reason})")
    intervals = [b - a for a, b in itertools.pairwise(ends[:timed_rounds + 1])]
    wall = ends[timed_rounds] - ends[0]
    return {"round_s": statistics.median(intervals), "startup_s": clock.began - t0, "first_round_s": ends[0] - clock.began,
            "split_s": split_between(clock.snapshots[0], clock.snapshots[timed_rounds], wall, timed_rounds),
            "density": [min(clock.densities[1:timed_rounds + 1]), max(clock.densities[1:timed_rounds + 1])],
            "scenario": scenario}


def bare_clients(scenario, count: int):
    """The bare loop's clients: the first ``count`` partitions (with their data) and the global model."""
    from fedgc.core.parts import build_model_for, federated_data

    data = federated_data(scenario)
    model = build_model_for(scenario, data)
    return [data.partitions[i % len(data.partitions)] for i in range(count)], model


def steps_for(scenario, size: int) -> int:
    c = scenario.client
    return c.local_steps or max(1, math.ceil(c.epochs * size / c.batch_size))


def bare_sequential(scenario, clients, model, device) -> None:
    """Each client: load the global weights, its steps of minibatch SGD, its delta. Plain PyTorch."""
    import torch
    import torch.nn.functional as F

    c = scenario.client
    start = {k: v.to(device) for k, v in model.state_dict().items()}
    worker = copy.deepcopy(model).to(device)
    params = list(worker.parameters())
    generator = torch.Generator().manual_seed(0)
    for data in clients:
        x, y = data.tensors(device)
        worker.load_state_dict(start)
        buffers = [None] * len(params)
        order, cursor = torch.randperm(len(data), generator=generator), 0
        for _ in range(steps_for(scenario, len(data))):
            if cursor >= len(data):
                order, cursor = torch.randperm(len(data), generator=generator), 0
            index = order[cursor:cursor + c.batch_size].to(device)
            cursor += c.batch_size
            for p in params:
                p.grad = None
            F.cross_entropy(worker(x[index]), y[index]).backward()
            with torch.no_grad():
                for i, p in enumerate(params):
                    g = p.grad
                    if c.momentum:
                        buffers[i] = g.clone() if buffers[i] is None else buffers[i].mul_(c.momentum).add_(g)
                        g = buffers[i]
                    p.add_(g, alpha=-c.lr)
        with torch.no_grad():
            {n: start[n] - p for n, p in worker.named_parameters()}  # the delta a client sends


def bare_vmap(scenario, clients, model, device) -> None:
    """All clients in one vmapped SGD step per local step (equal-size batches drawn per client)."""
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call, grad, vmap

    c = scenario.client
    worker = copy.deepcopy(model).to(device)
    start = {n: p.detach().to(device) for n, p in worker.named_parameters()}
    params = {n: p.unsqueeze(0).repeat(len(clients), *[1] * p.dim()) for n, p in start.items()}
    xs = [d.tensors(device) for d in clients]
    steps = max(steps_for(scenario, len(d)) for d in clients)
    generator = torch.Generator().manual_seed(0)

    def loss(p, xb, yb):
        return F.cross_entropy(functional_call(worker, p, (xb,)), yb)
    step = vmap(grad(loss))
    for _ in range(steps):
        picks = [torch.randint(len(y), (c.batch_size,), generator=generator).to(device) for _, y in xs]
        xb = torch.stack([x[i] for (x, _), i in zip(xs, picks)])
        yb = torch.stack([y[i] for (_, y), i in zip(xs, picks)])
        grads = step(params, xb, yb)
        with torch.no_grad():
            params = {n: p - c.lr * grads[n] for n, p in params.items()}
    with torch.no_grad():
        {n: start[n].unsqueeze(0) - p for n, p in params.items()}


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(name: str, rounds: int, device_spec: str, tiny: bool) -> dict:
    from fedgc.execution.device import resolve_device

    tree = scenario_tree(name, rounds + 2, tiny)  # round 1: start-up; the last: evaluation
    run = fedgc_rounds(tree, rounds, device_spec)
    scenario = run.pop("scenario")
    device = resolve_device(scenario.device)
    per_round = len(scenario_clients(scenario))
    vectorized = scenario.client.execution == "vectorized" or (
        scenario.client.execution == "auto" and device.type == "cuda")
    clients, model = bare_clients(scenario, per_round)
    bare = bare_vmap if vectorized else bare_sequential
    bare(scenario, clients[:2], model, device)  # warm: first calls allocate, compile kernels
    times = []
    for _ in range(rounds):
        synchronize(device)
        t0 = time.perf_counter()
        bare(scenario, clients, model, device)
        synchronize(device)
        times.append(time.perf_counter() - t0)
    bare_s = statistics.median(times)
    return {"clients_per_round": per_round, "execution": "vectorized" if vectorized else "sequential",
            "round_s": round(run["round_s"], 4), "bare_s": round(bare_s, 4),
            "round_over_bare": round(run["round_s"] / bare_s, 2),
            "overhead_ms_per_client": round(1000 * (run["round_s"] - bare_s) / per_round, 2),
            "startup_s": round(run["startup_s"], 2), "first_round_s": round(run["first_round_s"], 3),
            "split_s": run["split_s"], "density": run["density"]}


def scenario_clients(scenario) -> range:
    """The clients a round of the scenario selects (the strategy's fraction of the population)."""
    from fedgc.core.parts import SelectionPolicy

    s = scenario.strategy
    policy = SelectionPolicy(s.fraction, scenario.network.over_selection, s.min_clients, retries=0)
    return range(policy.wanted(scenario.data.num_clients))


class SynchronousStore:
    """``--store-thread off``: the disk store called in the round's own thread, as the inline engine
    called it before its I/O thread (``fedgc.flower.state.store_thread``): no read ahead, no write
    behind. What the thread saves the round, and what running beside it costs the round's other work
    (both threads share the interpreter lock), read side by side with a run of the default."""

    def __init__(self, store) -> None:
        self.store = store

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def prefetch(self, client: int) -> None:
        pass

    def flush(self) -> None:
        pass


def machine(device: str) -> dict:
    import torch
    from results_block import commit

    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") and torch.cuda.is_available() else None
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "gpu": gpu, "commit": commit(REPO)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated: " + ", ".join(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per workload (and bare repetitions)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: the machine's noise matters less)")
    parser.add_argument("--tiny", action="store_true", help="a few clients per workload: checks the output only")
    parser.add_argument("--write", metavar="LABEL", default=None,
                        help="write the table into docs/performance.md under this label (e.g. before, after, cuda)")
    parser.add_argument("--store-thread", choices=("on", "off"), default="on",
                        help="off: the disk store's reads and writes in the round's own thread (SynchronousStore)")
    parser.add_argument("--doc", default=str(REPO / "docs" / "performance.md"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 1000 or not 1 <= args.threads <= 256:
        parser.error("--rounds must be 1 to 1000 and --threads 1 to 256")
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        parser.error(f"--device: cpu, cuda or cuda:N, not {args.device!r}")
    if args.write is not None and not args.write.replace("-", "").replace("_", "").isalnum():
        parser.error(f"--write: a label of letters, digits, - and _, not {args.write!r}")
    names = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    import torch

    torch.set_num_threads(args.threads)
    if args.store_thread == "off":
        import fedgc.flower.runtime.inline_grid as inline_grid

        inline_grid.ThreadedStore = SynchronousStore  # type: ignore[misc, assignment]  # this process's runs only
    result: dict = {}
    for name in names:
        figures = measure(name, args.rounds, args.device, args.tiny)
        result[name] = figures
        print(f"{name:11s} {figures['clients_per_round']:5d} clients ({figures['execution']}): round "
              f"{figures['round_s']:.3f} s, bare training {figures['bare_s']:.3f} s, x{figures['round_over_bare']}, "
              f"{figures['overhead_ms_per_client']} ms a client-round beside training; start-up "
              f"{figures['startup_s']} s, first round {figures['first_round_s']} s", flush=True)
    result["machine"] = {**machine(args.device), "store_thread": args.store_thread}
    if args.write:
        from results_block import write_block

        begin, end = f"<!-- round_cost:{args.write}:begin -->", f"<!-- round_cost:{args.write}:end -->"
        write_block(Path(args.doc), begin, end, f"{begin}\n{table(result, args)}{end}")
    print(json.dumps(result))
    return result


def density(span: list[float]) -> str:
    """The timed rounds' upload density: one value, or the range the warm-up spans."""
    lo, hi = span
    return f"{lo:.4g}" if lo == hi else f"{lo:.4g} .. {hi:.4g}"


def table(result: dict, args: argparse.Namespace) -> str:
    """The figures as a markdown table, headed by what produced them."""
    m = result["machine"]
    where = f"GPU {m['gpu']}" if m["gpu"] else "no GPU"
    lines = [f"`bench/round_cost.py --rounds {args.rounds} --device {args.device}`, commit {m['commit']}, "
             f"{time.strftime('%Y-%m-%d')}, CPU kernel set {m['cpu_capability']}, {m['threads']} torch thread(s), "
             f"{where}, torch {m['torch']}{' (--tiny)' if args.tiny else ''}"
             f"{', the disk store in the round thread (--store-thread off)' if args.store_thread == 'off' else ''}:", "",
             "| workload | clients a round | execution | round (s) | bare training (s) | round / bare "
             "| fedgc's own ms a client-round | start-up (s) | first round (s) | upload density |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in WORKLOADS:
        if name in result:
            f = result[name]
            lines.append(f"| {name} | {f['clients_per_round']} | {f['execution']} | {f['round_s']:.3f} | "
                         f"{f['bare_s']:.3f} | {f['round_over_bare']} | {f['overhead_ms_per_client']} | {f['startup_s']} | "
                         f"{f['first_round_s']} | {density(f['density'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
