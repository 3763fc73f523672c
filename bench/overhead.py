"""Benchmark: what the simulator costs on top of the training it simulates.

One workload, three ways, in one run: 20 MNIST clients with 256 samples each (iid), the small CNN,
1 local epoch (batch 32, 8 SGD steps), 10 clients per round, ``--rounds`` rounds, one evaluation of
the final model on 1,000 test samples.

  (a) bare:   a plain PyTorch loop: per selected client load the global weights, train, then average
              the weights by sample count. No Flower, no compression, no network model.
  (b) fedgc:  ``fedgc.runs.engines.run_inline``: the real ClientApp and strategy, every message through
              Flower's serialization, DGC at 1% density with error feedback, simpy ``lte`` links.
  (c) flower: stock Flower simulation (``flwr.simulation.run_simulation``, Ray backend, its default
              client resources) with plain ``FedAvg`` and a ClientApp running the same loop as (a).

(a) and (b) run in this process, interleaved ``--reps`` times (data loaded and every import done
before timing); the figure is the ratio of the median wall times (``fedgc_over_bare``), with the
ratio of median process CPU times next to it (``fedgc_over_bare_cpu``, less sensitive to other jobs
on the machine). (c) runs once, timed around ``run_simulation`` (Ray start
included; ``flower_rounds_s`` is the time from the first to the end of the last round, measured in
its ServerApp). Torch uses one thread in every process (``OMP_NUM_THREADS=1``), so the three get the
same compute and the ratios measure software overhead. Targets: fedgc_over_bare <= 1.15.

    OMP_NUM_THREADS=1 .venv/bin/python bench/overhead.py [--rounds 5] [--reps 3] [--no-flower]

The last line printed is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
CLIENTS, SAMPLES, PER_ROUND, BATCH, LR, TEST = 20, 256, 10, 32, 0.05, 1000
SEED = 0


def scenario(rounds: int, root: str) -> dict:
    return {
        "name": "bench-overhead", "seed": SEED, "rounds": rounds,
        "data": {"dataset": "mnist", "root": root, "num_clients": CLIENTS, "partition": "iid",
                 "max_train_samples": CLIENTS * SAMPLES, "max_test_samples": TEST},
        "model": {"name": "small_cnn"},
        "client": {"epochs": 1, "batch_size": BATCH, "lr": LR},
        "compression": {"name": "dgc", "density": 0.01},
        "strategy": {"fraction": PER_ROUND / CLIENTS},
        "network": {"profile": "lte"},
        "eval": {"every": rounds, "batch_size": 1024},
    }


# The plain loop shared by (a) and (c) ---------------------------------------------------------
def plain_train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, seed: int) -> float:
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(y), generator=generator)
    loss_sum, steps = 0.0, 0
    for start in range(0, len(y), BATCH):
        batch = order[start:start + BATCH]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        loss_sum += float(loss.detach())
        steps += 1
    return loss_sum / steps


@torch.no_grad()
def plain_eval(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    correct = 0
    for start in range(0, len(y), 1024):
        correct += int((model(x[start:start + 1024]).argmax(1) == y[start:start + 1024]).sum())
    return correct / len(y)


def run_bare(parts: list[tuple[torch.Tensor, torch.Tensor]], test: tuple[torch.Tensor, torch.Tensor],
             rounds: int) -> float:
    from fedgc.models import build_model

    model = build_model("small_cnn", tuple(parts[0][0].shape[1:]), 10, SEED)
    global_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(SEED)
    for server_round in range(1, rounds + 1):
        selected = sorted(rng.choice(len(parts), size=PER_ROUND, replace=False).tolist())
        total = {k: torch.zeros_like(v) for k, v in global_weights.items()}
        examples = 0
        for cid in selected:
            model.load_state_dict(global_weights)
            x, y = parts[cid]
            plain_train(model, x, y, seed=SEED * 1000 + cid * 31 + server_round)
            for k, v in model.state_dict().items():
                total[k].add_(v, alpha=len(y))
            examples += len(y)
        global_weights = {k: v / examples for k, v in total.items()}
    model.load_state_dict(global_weights)
    return plain_eval(model, *test)


# (c) stock Flower simulation ------------------------------------------------------------------
def flower_apps(data_file: str, rounds: int, marks: dict):
    from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg

    client_app = ClientApp()
    cache: dict = {}

    @client_app.train()
    def train(msg: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        if "data" not in cache:
            with np.load(data_file) as z:
                cache["data"] = {k: torch.from_numpy(z[k]) for k in z.files}
        pid = int(context.node_config["partition-id"])
        x, y = cache["data"][f"x{pid}"], cache["data"][f"y{pid}"]
        from fedgc.models import build_model

        model = build_model("small_cnn", tuple(x.shape[1:]), 10, SEED)
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        server_round = int(msg.content["config"]["server-round"])
        loss = plain_train(model, x, y, seed=SEED * 1000 + pid * 31 + server_round)
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"train-loss": loss, "num-examples": len(y)})})
        return Message(content=content, reply_to=msg)

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        from fedgc.models import build_model

        with np.load(data_file) as z:
            test_x, test_y = torch.from_numpy(z["test_x"]), torch.from_numpy(z["test_y"])
        model = build_model("small_cnn", tuple(test_x.shape[1:]), 10, SEED)
        strategy = FedAvg(fraction_train=PER_ROUND / CLIENTS, fraction_evaluate=0.0,
                          min_train_nodes=PER_ROUND, min_available_nodes=CLIENTS)
        marks["start"] = time.perf_counter()
        result = strategy.start(grid=grid, initial_arrays=ArrayRecord(model.state_dict()), num_rounds=rounds)
        model.load_state_dict(result.arrays.to_torch_state_dict())
        marks["accuracy"] = plain_eval(model, test_x, test_y)
        marks["end"] = time.perf_counter()

    return server_app, client_app


def run_flower(parts, test, rounds: int) -> dict:
    try:
        import ray  # noqa: F401
        from flwr.simulation import run_simulation
    except ImportError as err:
        return {"available": False, "reason": f"{type(err).__name__}: {err}"}
    with tempfile.TemporaryDirectory() as tmp:
        data_file = str(Path(tmp) / "parts.npz")
        arrays = {f"x{i}": x.numpy() for i, (x, _) in enumerate(parts)}
        arrays.update({f"y{i}": y.numpy() for i, (_, y) in enumerate(parts)})
        np.savez(data_file, test_x=test[0].numpy(), test_y=test[1].numpy(), **arrays)
        marks: dict = {}
        server_app, client_app = flower_apps(data_file, rounds, marks)
        logging.getLogger("flwr").setLevel(logging.ERROR)
        t0 = time.perf_counter()
        run_simulation(server_app=server_app, client_app=client_app, num_supernodes=CLIENTS,
                       backend_config={"init_args": {"logging_level": "ERROR", "log_to_driver": False}})
        total = time.perf_counter() - t0
    if "end" not in marks:
        return {"available": False, "reason": "the simulation did not finish its rounds"}
    return {"available": True, "total_s": total, "rounds_s": marks["end"] - marks["start"],
            "accuracy": marks["accuracy"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--data-root", default=str(REPO.parent / "shared" / "data" / "mnist"))
    parser.add_argument("--no-flower", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from fedgc.core.parts import federated_data
    from fedgc.runs.engines import run_inline
    from fedgc.scenario.model import validate

    sc = validate(scenario(args.rounds, args.data_root))
    data = federated_data(sc)  # loaded once and cached, for (a) and (b) alike
    parts = [(torch.from_numpy(p.x), torch.from_numpy(p.y)) for p in data.partitions]
    assert all(len(y) == SAMPLES for _, y in parts), [len(y) for _, y in parts]
    test = (torch.from_numpy(data.test.x), torch.from_numpy(data.test.y))
    # Warm-up: first-call costs (lazy imports in torch.optim, flwr, simpy) are paid once, for both.
    run_bare(parts, test, 1)
    run_inline(validate(scenario(1, args.data_root)), None, quiet=True)

    times: dict[str, list[float]] = {"bare": [], "fedgc": []}
    cpu: dict[str, list[float]] = {"bare": [], "fedgc": []}
    accuracy: dict[str, float] = {}
    for rep in range(args.reps):
        order = ("bare", "fedgc") if rep % 2 == 0 else ("fedgc", "bare")
        for name in order:
            t0, c0 = time.perf_counter(), time.process_time()
            if name == "bare":
                accuracy["bare"] = run_bare(parts, test, args.rounds)
            else:
                accuracy["fedgc"] = run_inline(sc, None, quiet=True).final_accuracy
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            print(f"rep {rep} {name:6s} {times[name][-1]:7.2f} s wall {cpu[name][-1]:7.2f} s cpu", flush=True)
    bare, fedgc = statistics.median(times["bare"]), statistics.median(times["fedgc"])
    bare_cpu, fedgc_cpu = statistics.median(cpu["bare"]), statistics.median(cpu["fedgc"])
    flower = {"available": False, "reason": "--no-flower"} if args.no_flower else run_flower(parts, test, args.rounds)

    print(f"\n{'engine':8s} {'seconds':>9s} {'/ bare':>8s} {'accuracy':>9s}")
    print(f"{'bare':8s} {bare:9.2f} {1.0:8.3f} {accuracy['bare']:9.3f}")
    print(f"{'fedgc':8s} {fedgc:9.2f} {fedgc / bare:8.3f} {accuracy['fedgc']:9.3f}")
    if flower["available"]:
        print(f"{'flower':8s} {flower['total_s']:9.2f} {flower['total_s'] / bare:8.3f} {flower['accuracy']:9.3f}"
              f"   (rounds only: {flower['rounds_s']:.2f} s, {flower['rounds_s'] / bare:.3f})")
    else:
        print(f"flower   unavailable: {flower['reason']}")
    result = {
        "fedgc_over_bare": round(fedgc / bare, 4),
        "fedgc_over_bare_cpu": round(fedgc_cpu / bare_cpu, 4),
        "flower_over_bare": round(flower["total_s"] / bare, 4) if flower["available"] else None,
        "flower_rounds_over_bare": round(flower["rounds_s"] / bare, 4) if flower["available"] else None,
        "flower_available": flower["available"],
        "bare_s": round(bare, 3), "fedgc_s": round(fedgc, 3),
        "flower_s": round(flower["total_s"], 3) if flower["available"] else None,
        "bare_runs_s": [round(t, 3) for t in times["bare"]], "fedgc_runs_s": [round(t, 3) for t in times["fedgc"]],
        "bare_cpu_s": [round(t, 3) for t in cpu["bare"]], "fedgc_cpu_s": [round(t, 3) for t in cpu["fedgc"]],
        "rounds": args.rounds, "clients": CLIENTS, "per_round": PER_ROUND, "samples_per_client": SAMPLES,
        "torch_threads": torch.get_num_threads(), "target_fedgc_over_bare": 1.15,
    }
    if not flower["available"]:
        result["flower_unavailable_reason"] = flower["reason"]
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
