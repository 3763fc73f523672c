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
case runs a second time with fedgc's reply collection polling every 3 s (Flower's
``Grid.send_and_receive`` step) instead of 0.05 s (``reply_step_3s_run``), from a copy of the app
changed in that one constant; the model predicts it with ``reply_poll_s: 3``.

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
import tomli_w
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fedgc.network import ClientJob, NetworkConfig, build_network
from fedgc.network.traces import read_trace
from fedgc.shaped import Star, unavailable_reason
from fedgc.shaped.deployment import ShapedDeployment
from fedgc.shaped.relay import event_flows, read_log
from fedgc.shaped.replay import TraceReplay
from fedgc.shaped.traffic import CounterSampler

TRACE = "bus.ljansbakken-oslo-report.2010-09-28_1407CEST.log"  # Norway HSDPA, mean 2.8 Mbit/s
SPEED = 1000.0  # simulated device speed (samples/s): compute_samples = measured compute s x SPEED
FLOWER_STEP_S = 3.0  # Flower's send_and_receive reply poll (flwr/superlink/grid/http_grid.py)
MIN_ROUND_S = 2.0
UPLOAD_GAP_S = 1.5


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


def app_with_reply_step(step_s: float, dest: Path) -> Path:
    """A copy of this repository's Flower app (pyproject.toml, README.md, fedgc/) whose reply collection
    polls every ``step_s`` instead of ``POLL_INTERVAL_S``: what the ServerApp (run from the installed
    bundle) does with Flower's 3-s step. The repository itself is not changed."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "fedgc", dest / "fedgc", ignore=shutil.ignore_patterns("__pycache__"))
    grid = dest / "fedgc" / "flower" / "partition_grid.py"
    text = grid.read_text()
    line = next((x for x in text.splitlines() if x.startswith("POLL_INTERVAL_S = ")), None)
    if line is None:
        raise RuntimeError(f"{grid}: no POLL_INTERVAL_S line to change")
    grid.write_text(text.replace(line, f"POLL_INTERVAL_S = {step_s!r}", 1))
    return dest


def measure(case: dict, work: Path, trace_dir: Path, app_dir: Path = REPO) -> dict:
    """Run the case on a shaped deployment; per round: start, end, and per client the phases."""
    n, net = case["clients"], case["network"]
    rates = [(net.get("up_mbps", 1.0), net.get("down_mbps", 1.0))] * n
    rtt_s = net.get("rtt_ms", 0.0) / 1000.0
    with Star(rates) as star:
        deployment = ShapedDeployment(star, work, delay_ms=rtt_s * 1000.0 / 2.0)
        replay = None
        if isinstance(net.get("link"), dict) and net["link"]["name"] == "trace":
            curve = read_trace(trace_dir / TRACE, "pensieve")
            replay = TraceReplay(star, [(curve, curve)] * n)
        deployment.start_superlink()
        for i in range(n):
            deployment.start_supernode(i, f"partition-id={i} num-partitions={n}")
        out = work / "out"
        run_config = work / "run-config.toml"
        run_config.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(scenario(n, case["rounds"], net)),
                                             "out-dir": str(out), "quiet": True, "node-wait-s": 180.0}))
        devs = [c.hub_dev for c in star.clients]
        if replay is not None:
            replay.start()
        with CounterSampler(deployment.anchor.pid, [*devs, "lo"]) as sampler:
            code = deployment.flwr_run(app_dir, run_config, timeout_s=600)
        if replay is not None:
            replay.stop()
        if code != 0 or not (out / "metrics.jsonl").exists():
            raise RuntimeError(f"flwr run failed ({code}): {(work / 'flwr-run.log').read_text()[-2000:]}")
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        t0 = replay.t0 if replay is not None else 0.0
        (work / "counters.json").write_text(json.dumps({"interfaces": [*devs, "lo"], "t0": t0,
                                                        "samples": sampler.samples}))
    # The relays write their logs when Star.close() stops them, so they are read after the star.
    relays = [read_log(work / f"relay-{i}.events") for i in range(n)] if rtt_s > 0 else None
    measured = from_counters(sampler, rows, devs, n, t0, relays, rtt_s)
    if relays is not None:
        measured["relay_lateness_s"] = {k: max(r[1][k] for r in relays) for k in ("mean", "p99", "max")}
    (work / "phases.json").write_text(json.dumps(measured))
    return measured


def from_counters(sampler: CounterSampler, rows: list[dict], devs: list[str], n: int, t0: float,
                  relays: list | None = None, rtt_s: float = 0.0) -> dict:
    """The phases from the sampled counters. An upload may pause (the SuperNode pushes each reply object
    once its ClientApp has stored it, waiting 0.5 s for one that is not there yet), so an upload flow
    spans pauses of up to ``UPLOAD_GAP_S``; compute (seconds of silence) separates it from the download.
    A download flow ends at a 0.3-s pause: the SuperNode's 3-s polls before it must not join it."""
    downs = {i: sampler.flows(devs[i], "tx", min_bytes=500_000) for i in range(n)}
    ups = {i: sampler.flows(devs[i], "rx", gap_s=UPLOAD_GAP_S, min_bytes=500_000) for i in range(n)}
    pushes = sampler.flows("lo", "tx", gap_s=0.05, min_bytes=500_000)
    client_side = None
    if relays is not None:
        # At the client, a download's requests are up to an RTT apart (each object pull waits for its
        # reply), so its flow spans gaps of 0.3 s + RTT; its reply's flow may pause as on the hub side.
        client_side = ({i: event_flows(relays[i][0], "down", 0.3 + rtt_s, 500_000) for i in range(n)},
                       {i: event_flows(relays[i][0], "up", UPLOAD_GAP_S, 500_000) for i in range(n)})
    return phases(rows, downs, ups, pushes, n, t0, client_side)


def phases(rows, downs, ups, pushes, n, t0, client_side=None) -> dict:
    """Per round and client, from the counters (wall clock) and fedgc's round rows. The round starts when
    the ServerApp pushes its messages to the SuperLink: the last big burst on the hub's loopback before
    the round's first download flow (the later bursts there are the replies it pulls). Its end is
    fedgc's own: push + ``round_duration_s``."""
    # The transfers of the round's messages, not the app bundle or the small protocol messages.
    down_min = 0.5 * min(r["bytes_down"] / r["selected"] for r in rows)
    up_min = 0.5 * min(min(r["client_upload_bytes"]) for r in rows)
    downs = {i: [f for f in flows if f.nbytes >= down_min] for i, flows in downs.items()}
    ups = {i: [f for f in flows if f.nbytes >= up_min] for i, flows in ups.items()}
    if client_side is None:  # no delay: the client sees the transfers when the hub does
        client_downs, client_ups = downs, ups
    else:
        client_downs = {i: [f for f in flows if f.nbytes >= down_min] for i, flows in client_side[0].items()}
        client_ups = {i: [f for f in flows if f.nbytes >= up_min] for i, flows in client_side[1].items()}
    for where, dn, up in (("hub", downs, ups), ("client", client_downs, client_ups)):
        if any(len(up[i]) != len(rows) or len(dn[i]) != len(rows) for i in range(n)):
            raise RuntimeError(f"expected {len(rows)} transfers each way per client, counted at the {where} "
                               f"{[len(dn[i]) for i in range(n)]} down, {[len(up[i]) for i in range(n)]} up")
    rounds = []
    for k, row in enumerate(rows):
        if row["applied_nodes"] != list(range(1, n + 1)):
            raise RuntimeError(f"round {row['round']}: applied {row['applied_nodes']}, expected every client")
        first_download = min(downs[i][k].start for i in range(n))
        before = [f.start for f in pushes if f.nbytes >= down_min and f.start <= first_download]
        if not before:
            raise RuntimeError(f"round {row['round']}: no push seen on the hub's loopback before its downloads")
        push = before[-1]
        clients = []
        for i in range(n):
            d, u = downs[i][k], ups[i][k]
            got, sent = client_downs[i][k].end, client_ups[i][k].start  # at the SuperNode
            clients.append({"node": i + 1, "pickup_s": d.start - push, "download_s": got - push,
                            "compute_s": sent - got, "upload_s": u.end - sent, "down_flow_s": got - d.start,
                            "last_byte_s": u.end - push, "down_bytes": round(row["bytes_down"] / n),
                            "up_bytes": row["client_upload_bytes"][i],
                            "down_frame_bytes": d.nbytes, "up_frame_bytes": u.nbytes})
        rounds.append({"round": row["round"], "start_s": push - t0, "round_s": row["round_duration_s"],
                       "clients": clients})
    return {"rounds": rounds}


def simulate(network: dict, measured: dict, protocol: str, n: int, reply_poll_s: float = 0.05) -> list[dict]:
    """Each measured round replayed on the network model from its measured start."""
    out = []
    chosen = {"name": "ideal"} if protocol == "ideal" else {"name": "flower", "reply_poll_s": reply_poll_s}
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


def round_trips(network: dict, measured: dict) -> dict:
    """The protocol's round trips per transfer on a constant link with an RTT: a download's time from the
    request that picked it up reaching the hub to its last byte at the SuperNode, an upload's from its
    first byte leaving the SuperNode to its last at the hub, less the bytes at the link's rate, in RTTs,
    less the RTT/2 the model's link charges: what ``requests_down``/``requests_up`` stand for."""
    rtt = network["rtt_ms"] / 1000.0
    down, up = [], []
    for rnd in measured["rounds"][1:]:  # round 1's download also fetches the run and the app bundle
        for c in rnd["clients"]:
            down.append((c["down_flow_s"] - c["down_bytes"] * 8 / (network["down_mbps"] * 1e6)) / rtt - 0.5)
    for rnd in measured["rounds"]:
        for c in rnd["clients"]:
            up.append((c["upload_s"] - c["up_bytes"] * 8 / (network["up_mbps"] * 1e6)) / rtt - 0.5)
    return {"round_trips_down": [round(x, 2) for x in down], "round_trips_up": [round(x, 2) for x in up]}


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
    parser.add_argument("--case", help="run only the cases whose name contains this (and no 3-s step run "
                        "unless the first case is among them)")
    parser.add_argument("--no-step-run", action="store_true",
                        help="skip the run of the first case with replies collected every 3 s")
    parser.add_argument("--workdir", help="keep the runs' logs and outputs here (default: a temporary folder)")
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
            measured = measure(case, Path(tmp) / f"case{k}", trace_dir)
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
        if not args.no_step_run and "constant 4 down / 2 up Mbit/s" in cases:  # the first case again, replies collected every 3 s
            name = "constant 4 down / 2 up Mbit/s"
            network = cases[name]
            case = {"clients": args.clients, "rounds": rounds, "network": network}
            app = app_with_reply_step(FLOWER_STEP_S, Path(tmp) / "app-step-3s")
            stepped = measure(case, Path(tmp) / "case-step-3s", trace_dir, app)
            base = result["cases"][name]["measured"]
            model = simulate(network, stepped, "flower", args.clients, reply_poll_s=FLOWER_STEP_S)
            print(table(f"{name}, replies collected every 3 s", stepped, model,
                        simulate(network, stepped, "ideal", args.clients)), flush=True)
            fast = [r["round_s"] for r in base]
            slow = [r["round_s"] for r in stepped["rounds"]]
            result["reply_step_3s_run"] = {
                "case": name, "round_s_fedgc_poll": [round(x, 3) for x in fast],
                "round_s_3s_step": [round(x, 3) for x in slow],
                "held_after_last_byte_s_fedgc_poll": [round(r["round_s"] - max(c["last_byte_s"] for c in r["clients"]), 3)
                                                      for r in base],
                "held_after_last_byte_s_3s_step": [round(r["round_s"] - max(c["last_byte_s"] for c in r["clients"]), 3)
                                                   for r in stepped["rounds"]],
                "max_round_time_error_flower_3s": round(max(errors(stepped, model), default=0.0), 4)}

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
