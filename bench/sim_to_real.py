"""The simulated clock against a real, shaped network (docs/sim-to-real.md).

Each case runs one fedgc scenario twice:
- **measured**: fedgc's ServerApp (``flwr run`` of this repository) on a real ``flower-superlink`` and
  ``flower-supernode``s, each SuperNode in its own network namespace behind a ``tbf``-shaped veth
  (``fedgc.shaped``), a throughput trace replayed with ``tc qdisc change`` in the trace case. Per client
  and round, the phases are read off the interfaces' byte counters: download = server push → the end of
  the client's download flow (pick-up delay included), compute = end of the download → start of the
  upload flow, upload = that flow; the round time is fedgc's own (``round_duration_s``, push → the
  last reply collected).
- **simulated**: the network model (``fedgc.network``) for the same links, the messages' wire sizes
  and the clients' *measured* compute times, each round started at its measured start (so the trace
  is at the same point), with ``protocol: flower`` and ``protocol: ideal``.

One case adds propagation delay: each SuperNode reaches the SuperLink through a relay in its namespace
that holds every chunk ``rtt_ms``/2 each way (``fedgc.shaped.relay``), and the scenario's ``rtt_ms`` is
that RTT. There the client's own side is read off the relay's log: the download ends when the last byte
of its download (the confirm's reply included) reaches the SuperNode, compute is the silence from there
to the first byte of its reply leaving the SuperNode, the upload runs from there to the last byte at the
hub. ``round_trips_down``/``round_trips_up`` are the protocol's measured round trips per transfer (the
time not spent on the bytes at the link's rate, less the model's RTT/2, in RTTs), to set against
``requests_down``/``requests_up``.

``max_round_time_error`` is |simulated − measured| / measured over rounds of at least 2 s. The first
case runs a second time collecting replies the way Flower's own grid does (``flower_collection_run``):
from a copy of the app whose loop polls every 3 s (``Grid.send_and_receive``'s step) and pulls each
reply with Flower's object backoff (no ``fedgc.flower.server.superlink_grid``); the model predicts it with
``reply_poll_s: 3, pull_backoff_s: 1, pull_backoff_cap_s: 10``.

Needs root and ``ip netns`` (skips with one line otherwise). Prints one JSON object on its last line.
``--quick``: one constant case, 2 rounds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import simpy

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fedgc.network import ClientJob, NetworkConfig, build_network
from fedgc.network.traces import read_trace
from fedgc.shaped import unavailable_reason
from fedgc.shaped.phases import measure, read_phases, round_trips

TRACE = "bus.ljansbakken-oslo-report.2010-09-28_1407CEST.log"  # Norway HSDPA, mean 2.8 Mbit/s
SPEED = 1000.0  # simulated device speed (samples/s): compute_samples = measured compute s x SPEED
FLOWER_STEP_S = 3.0  # Flower's send_and_receive reply poll (flwr/superlink/grid/http_grid.py)
# How Flower's own grid collects replies, in the model's terms (flwr/supercore/constant.py)
FLOWER_COLLECTION = {"reply_poll_s": FLOWER_STEP_S, "pull_backoff_s": 1.0, "pull_backoff_cap_s": 10.0}
MIN_ROUND_S = 2.0


def scenario(clients: int, rounds: int, network: dict) -> dict:
    """Dense FedAvg on digits with a 648k-parameter MLP: 2.6 MB each way, seconds on a few Mbit/s."""
    return {"name": "sim-to-real", "seed": 0, "rounds": rounds,
            "data": {"dataset": "digits", "num_clients": clients, "partition": "iid"},
            "model": {"name": "mlp", "options": {"hidden": [768, 768]}},
            "client": {"local_steps": 5, "batch_size": 32, "lr": 0.05},
            "compression": {"name": "none", "error_feedback": False},
            "strategy": {"fraction": 1.0}, "eval": {"every": 1000}, "network": network}


def trace_network(trace_dir: Path) -> dict:
    return {"link": {"name": "trace", "format": "pensieve", "down": [TRACE], "up": [TRACE], "random_start": False},
            "trace_dir": str(trace_dir), "rtt_ms": 0.0}


def app_with_flower_collection(dest: Path) -> Path:
    """A copy of this repository's Flower app (pyproject.toml, README.md, fedgc/) that collects replies
    as a ServerApp on Flower's own grid does: polling every 3 s (``send_and_receive``) instead of
    ``POLL_INTERVAL_S``, and pulling each reply's objects with Flower's backoff (the grid is not
    wrapped in ``superlink_grid.collecting``). The repository itself is not changed."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "fedgc", dest / "fedgc", ignore=shutil.ignore_patterns("__pycache__"))
    edits = {dest / "fedgc" / "flower" / "partition_grid.py": ("POLL_INTERVAL_S = ", f"POLL_INTERVAL_S = {FLOWER_STEP_S!r}"),
             dest / "fedgc" / "flower" / "superlink_grid.py": ("    return SuperLinkGrid(grid)", "    return grid")}
    for path, (start, new) in edits.items():
        text = path.read_text()
        line = next((x for x in text.splitlines() if x.startswith(start)), None)
        if line is None:
            raise RuntimeError(f"{path}: no line starting {start!r} to change")
        path.write_text(text.replace(line, new, 1))
    return dest


def measure_case(case: dict, work: Path, trace_dir: Path, app_dir: Path = REPO, reread: bool = False) -> dict:
    net, n = case["network"], case["clients"]
    if reread:  # a kept run, read again
        return read_phases(work, n, net.get("rtt_ms", 0.0))
    trace = None
    if isinstance(net.get("link"), dict) and net["link"]["name"] == "trace":
        trace = read_trace(trace_dir / TRACE, "pensieve")
    return measure(scenario(n, case["rounds"], net), work, app_dir, rtt_ms=net.get("rtt_ms", 0.0), trace=trace,
                   rates=[(net.get("up_mbps", 1.0), net.get("down_mbps", 1.0))] * n)


def simulate(network: dict, measured: dict, protocol: str, n: int, collection: dict | None = None) -> list[dict]:
    """Each measured round replayed on the network model from its measured start (``collection``:
    the flower protocol's reply collection keys, when not its defaults)."""
    out = []
    chosen = {"name": "ideal"} if protocol == "ideal" else {"name": "flower", **(collection or {})}
    config = NetworkConfig(**network, protocol=chosen, device={"name": "constant", "samples_per_s": SPEED})
    for rnd in measured["rounds"]:
        net = build_network(simpy.Environment(initial_time=rnd["start_s"]), config, list(range(1, n + 1)),
                            np.random.default_rng(0))
        jobs = [ClientJob(c["node"], c["down_bytes"], round(c["compute_s"] * SPEED), c["up_bytes"])
                for c in rnd["clients"]]
        tl = net.run_round(jobs)
        # upload_s: the transfer alone; held_s: push -> the server holds the reply (protocol waits included)
        out.append({"round_s": tl.end - tl.start, "clients": [
            {"download_s": t.downloaded - t.start, "compute_s": t.computed - t.downloaded,
             "upload_s": net.clients[t.node_id].link.transfer_time(t.computed, job.up_bytes, "up"),
             "held_s": t.uploaded - t.start} for t, job in zip(tl.timings, jobs)]})
    return out


def chosen_requests() -> tuple[int, int]:
    """The model's default request round trips (``protocol: flower``)."""
    config = NetworkConfig(protocol={"name": "flower"})
    return config.protocol.requests_down, config.protocol.requests_up


def errors(measured: dict, simulated: list[dict]) -> list[float]:
    return [abs(s["round_s"] - m["round_s"]) / m["round_s"]
            for m, s in zip(measured["rounds"], simulated) if m["round_s"] >= MIN_ROUND_S]


def table(name: str, measured: dict, flower: list[dict], ideal: list[dict]) -> str:
    lines = [f"\n{name}: m measured, f simulated with protocol flower, i with ideal (seconds since the push)",
             ("| round | client | pick-up m | download m / f / i | compute (m, used by f and i) | upload m / model | "
              "last byte m | held f / i | round m / f / i |"), "|---|---|---|---|---|---|---|---|---|"]
    for m, f, i in zip(measured["rounds"], flower, ideal):
        for cm, cf, ci in zip(m["clients"], f["clients"], i["clients"]):
            lines.append(f"| {m['round']} | {cm['node']} | {cm['pickup_s']:.2f} | {cm['download_s']:.2f} / "
                         f"{cf['download_s']:.2f} / {ci['download_s']:.2f} | {cm['compute_s']:.2f} | "
                         f"{cm['upload_s']:.2f} / {ci['upload_s']:.2f} | {cm['last_byte_s']:.2f} | "
                         f"{cf['held_s']:.2f} / {ci['held_s']:.2f} | {m['round_s']:.2f} / {f['round_s']:.2f} / "
                         f"{i['round_s']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--case", help="run only the cases whose name contains this (and no Flower-collection run "
                        "unless the first case is among them)")
    parser.add_argument("--no-flower-collection", action="store_true",
                        help="skip the run of the first case with replies collected as Flower's grid does")
    parser.add_argument("--workdir", help="keep the runs' logs and outputs here (default: a temporary folder)")
    parser.add_argument("--reread", action="store_true", help="run nothing: read the runs kept in --workdir again")
    parser.add_argument("--trace-dir", default=str(REPO.parent / "shared" / "traces" / "pensieve" / "cooked_traces"))
    args = parser.parse_args(argv)

    def interrupt(signum, frame):  # SIGTERM unwinds like Ctrl-C, so the namespaces are removed
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    reason = unavailable_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        print(json.dumps({"skipped": reason}))
        return 0
    trace_dir = Path(args.trace_dir)
    if not (trace_dir / TRACE).is_file():
        raise SystemExit(f"trace {trace_dir / TRACE}: no such file (set --trace-dir)")
    cases = {"constant 4 down / 2 up Mbit/s": {"up_mbps": 2.0, "down_mbps": 4.0, "rtt_ms": 0.0},
             "constant 8 down / 4 up Mbit/s": {"up_mbps": 4.0, "down_mbps": 8.0, "rtt_ms": 0.0},
             "trace (Norway HSDPA bus, both ways)": trace_network(trace_dir),
             # the shaped links' RTT (< 1 ms) plus a relay's 2 x 100 ms
             "constant 8 down / 4 up Mbit/s, RTT 200 ms": {"up_mbps": 4.0, "down_mbps": 8.0, "rtt_ms": 200.0}}
    rounds = args.rounds
    if args.case:
        cases = {name: net for name, net in cases.items() if args.case in name}
        if not cases:
            raise SystemExit(f"--case {args.case!r}: no case's name contains it")
    if args.quick:
        cases, rounds = dict(list(cases.items())[:1]), 2
    result = {"clients": args.clients, "rounds": rounds, "cases": {}}
    all_flower, all_ideal, pickups = [], [], []
    with tempfile.TemporaryDirectory(prefix="fedgc-sim-to-real-") as tmp:
        tmp = args.workdir or tmp
        for k, (name, network) in enumerate(cases.items()):
            started = time.perf_counter()
            case = {"clients": args.clients, "rounds": rounds, "network": network}
            measured = measure_case(case, Path(tmp) / f"case{k}", trace_dir, reread=args.reread)
            flower = simulate(network, measured, "flower", args.clients)
            ideal = simulate(network, measured, "ideal", args.clients)
            print(table(name, measured, flower, ideal), flush=True)
            ef, ei = errors(measured, flower), errors(measured, ideal)
            all_flower += ef
            all_ideal += ei
            for rnd in measured["rounds"]:
                pickups += [c["pickup_s"] for c in rnd["clients"]]
            result["cases"][name] = {
                "measured": measured["rounds"], "simulated_flower": flower, "simulated_ideal": ideal,
                "max_round_time_error_flower": round(max(ef, default=0.0), 4),
                "max_round_time_error_ideal": round(max(ei, default=0.0), 4),
                "wall_s": round(time.perf_counter() - started, 1)}
            if network.get("rtt_ms", 0.0) > 0:
                trips = round_trips(network, measured)
                print(f"\n{name}: protocol round trips per transfer (model: requests_down "
                      f"{chosen_requests()[0]}, requests_up {chosen_requests()[1]}): {trips}; relay lateness "
                      f"{measured['relay_lateness_s']}", flush=True)
                result["cases"][name].update({
                    "rtt_ms": network["rtt_ms"], "relay_lateness_ms_max": round(1000 * measured["relay_lateness_s"]["max"], 2),
                    # medians: an upload that pauses for its ClientApp's objects (0.5-s waits) is not
                    # made of round trips, and would swamp a mean
                    "round_trips_down_median": round(float(np.median(trips["round_trips_down"])), 2),
                    "round_trips_up_median": round(float(np.median(trips["round_trips_up"])), 2),
                    "round_trips_up_min": round(min(trips["round_trips_up"]), 2)})
        if not args.no_flower_collection and "constant 4 down / 2 up Mbit/s" in cases:  # the first case again, Flower's way
            name = "constant 4 down / 2 up Mbit/s"
            network = cases[name]
            case = {"clients": args.clients, "rounds": rounds, "network": network}
            app = Path(tmp) / "app-flower-collection"
            if not args.reread:
                app_with_flower_collection(app)
            slow = measure_case(case, Path(tmp) / "case-flower-collection", trace_dir, app, reread=args.reread)
            base = result["cases"][name]["measured"]
            model = simulate(network, slow, "flower", args.clients, FLOWER_COLLECTION)
            print(table(f"{name}, replies collected as Flower's grid does", slow, model,
                        simulate(network, slow, "ideal", args.clients)), flush=True)

            def held(rounds_):  # the round's close after the last byte of its last upload reached the hub
                return [round(r["round_s"] - max(c["last_byte_s"] for c in r["clients"]), 3) for r in rounds_]

            result["flower_collection_run"] = {
                "case": name, "round_s_fedgc": [round(r["round_s"], 3) for r in base],
                "round_s_flower": [round(r["round_s"], 3) for r in slow["rounds"]],
                "held_after_last_byte_s_fedgc": held(base), "held_after_last_byte_s_flower": held(slow["rounds"]),
                "max_round_time_error_flower_collection": round(max(errors(slow, model), default=0.0), 4)}

    result.update({
        "max_round_time_error_flower": round(max(all_flower, default=0.0), 4),
        "max_round_time_error_ideal": round(max(all_ideal, default=0.0), 4),
        "mean_round_time_error_flower": round(float(np.mean(all_flower)), 4) if all_flower else None,
        "mean_round_time_error_ideal": round(float(np.mean(all_ideal)), 4) if all_ideal else None,
        "target_met": bool(all_flower) and max(all_flower) <= 0.10,
        "pickup_s_mean": round(float(np.mean(pickups)), 3), "pickup_s_max": round(float(np.max(pickups)), 3)})
    for case in result["cases"].values():  # keep the last line readable: the tables above hold the detail
        for key in ("measured", "simulated_flower", "simulated_ideal"):
            case.pop(key)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
