"""A run of fedgc's Flower app on a shaped deployment, and each round's phases read off the network.

``measure`` starts a ``flower-superlink`` and one ``flower-supernode`` per client on a shaped star
(``deployment``), submits fedgc's ServerApp with ``flwr run`` and samples the hub's byte counters
(``traffic``) meanwhile. ``phases`` then turns counters and fedgc's round rows into, per round and client:
pick-up (server push → the download flow starts), download (push → its last byte at the SuperNode),
compute (→ the first byte of the reply leaving the SuperNode), upload (→ its last byte at the hub),
collection (→ the ServerApp starting to pull the reply from the SuperLink, on the hub's loopback) and
the round (fedgc's own ``round_duration_s``: push → the last reply collected). With a relay's delay the
client's side is read off the relay's log (``relay``). ``bench/sim_to_real.py`` sets these against the
network model; ``tests/test_shaped_network.py`` checks how soon a reply is collected after its last byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tomli_w
import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

from fedgc.network.piecewise import PeriodicRate
from fedgc.shaped.deployment import ShapedDeployment
from fedgc.shaped.netns import Star
from fedgc.shaped.relay import event_flows, read_log
from fedgc.shaped.replay import TraceReplay
from fedgc.shaped.traffic import CounterSampler, Flow

UPLOAD_GAP_S = 1.5
# A SuperNode's requests after its reply (a pull for new work, a heartbeat) can fall within the upload's
# gap: an upload ends when all but this many of its bytes are in.
POLL_TAIL_BYTES = 20_000
# Less than one full segment in a 10-ms sample is not a transfer: the ACKs of an upload on the download
# side, or the next message's pull requests on the upload side, when a client is handed its next
# message the moment it has sent its reply.
MIN_STEP_BYTES = 1448
# A download that a trace's near-zero stretch cut into pieces is put back together when its pieces are
# at most this far apart and each one short of the message.
MERGE_GAP_S = 3.0


def measure(scenario: dict[str, Any], work: Path, app_dir: Path, *, rates: list[tuple[float, float]], rtt_ms: float = 0.0,
            trace: PeriodicRate | None = None, timeout_s: float = 600.0) -> dict[str, Any]:
    """Run ``scenario`` (a mapping, ``data.num_clients`` = ``len(rates)``) as fedgc's Flower app from
    ``app_dir`` on a star whose client ``i`` has ``rates[i]`` = (up, down) Mbit/s (or replays ``trace``
    both ways), each SuperNode ``rtt_ms`` away through a relay; per round: start, end and per client the
    phases (``phases``). Logs, counters and ``phases.json`` stay in ``work``."""
    n = len(rates)
    with Star(rates) as star:
        deployment = ShapedDeployment(star, work, delay_ms=rtt_ms / 2.0)
        replay = TraceReplay(star, [(trace, trace)] * n) if trace is not None else None
        deployment.start_superlink()
        for i in range(n):
            deployment.start_supernode(i, f"partition-id={i} num-partitions={n}")
        out = work / "out"
        run_config = work / "run-config.toml"
        run_config.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(scenario), "out-dir": str(out),
                                             "quiet": True, "node-wait-s": 180.0}))
        devs = [c.hub_dev for c in star.clients]
        if replay is not None:
            replay.start()
        with CounterSampler(deployment.anchor.pid, [*devs, "lo"]) as sampler:
            code = deployment.flwr_run(app_dir, run_config, timeout_s=timeout_s)
        if replay is not None:
            replay.stop()
        if code != 0 or not (out / "metrics.jsonl").exists():
            raise RuntimeError(f"flwr run failed ({code}): {(work / 'flwr-run.log').read_text()[-2000:]}")
        t0 = replay.t0 if replay is not None else 0.0
        (work / "counters.json").write_text(json.dumps({"interfaces": [*devs, "lo"], "t0": t0,
                                                        "samples": sampler.samples}))
    # The relays write their logs when Star.close() stops them, so they are read after the star.
    return read_phases(work, n, rtt_ms)


def read_phases(work: Path, n: int, rtt_ms: float = 0.0) -> dict[str, Any]:
    """The phases of the run kept in ``work`` (its counters, round rows and relay logs), also
    ``phases.json`` there: what ``measure`` returns, and how a kept run is read again."""
    sampled = json.loads((work / "counters.json").read_text())
    sampler = CounterSampler(0, sampled["interfaces"])
    sampler.samples = [(t, {k: tuple(v) for k, v in c.items()}) for t, c in sampled["samples"]]
    rows = [json.loads(line) for line in (work / "out" / "metrics.jsonl").read_text().splitlines()]
    rtt_s = rtt_ms / 1000.0
    relays = [read_log(work / f"relay-{i}.events") for i in range(n)] if rtt_s > 0 else None
    measured = from_counters(sampler, rows, sampled["interfaces"][:n], n, sampled["t0"], relays, rtt_s)
    if relays is not None:
        measured["relay_lateness_s"] = {k: max(r[1][k] for r in relays) for k in ("mean", "p99", "max")}
    (work / "phases.json").write_text(json.dumps(measured))
    return measured


def from_counters(sampler: CounterSampler, rows: list[dict[str, Any]], devs: list[str], n: int, t0: float,
                  relays: list[tuple[list[tuple[float, str, int]], dict[str, float]]] | None = None,
                  rtt_s: float = 0.0) -> dict[str, Any]:
    """The phases from the sampled counters. An upload may pause (the SuperNode pushes each reply object
    once its ClientApp has stored it, waiting 0.5 s for one that is not there yet), so an upload flow
    spans pauses of up to ``UPLOAD_GAP_S``; compute (seconds of silence) separates it from the download.
    A download flow ends at a 0.3-s pause: the SuperNode's 3-s polls before it must not join it."""
    down_bytes = min(r["bytes_down"] / r["selected"] for r in rows)
    downs = {i: merge_pieces(sampler.flows(devs[i], "tx", min_bytes=1, min_step=MIN_STEP_BYTES), down_bytes)
             for i in range(n)}
    ups = {i: sampler.flows(devs[i], "rx", gap_s=UPLOAD_GAP_S, min_bytes=500_000, tail_bytes=POLL_TAIL_BYTES,
                            min_step=MIN_STEP_BYTES) for i in range(n)}
    pushes = sampler.flows("lo", "tx", gap_s=0.05, min_bytes=500_000)
    client_side = None
    if relays is not None:
        # At the client, a download's requests are up to an RTT apart (each object pull waits for its
        # reply), so its flow spans gaps of 0.3 s + RTT; its reply's flow may pause as on the hub side.
        client_side = ({i: event_flows(relays[i][0], "down", 0.3 + rtt_s, 500_000) for i in range(n)},
                       {i: event_flows(relays[i][0], "up", UPLOAD_GAP_S, 500_000) for i in range(n)})
    return phases(rows, downs, ups, pushes, n, t0, client_side)


def merge_pieces(flows: list[Flow], message_bytes: float) -> list[Flow]:
    """Consecutive flows joined while what is joined so far is short of ``message_bytes`` and the next
    starts within ``MERGE_GAP_S``."""
    merged: list[Flow] = []
    for flow in flows:
        last = merged[-1] if merged else None
        if last is not None and last.nbytes < 0.97 * message_bytes and flow.start - last.end <= MERGE_GAP_S:
            merged[-1] = Flow(last.start, flow.end, last.nbytes + flow.nbytes)
        else:
            merged.append(flow)
    return merged


def phases(rows: list[dict[str, Any]], downs: dict[int, list[Flow]], ups: dict[int, list[Flow]], pushes: list[Flow],
           n: int, t0: float, client_side: tuple[dict[int, list[Flow]], dict[int, list[Flow]]] | None = None
           ) -> dict[str, Any]:
    """Per round and client, from the counters (wall clock) and fedgc's round rows. The round starts when
    the ServerApp pushes its messages to the SuperLink: the last big burst on the hub's loopback before
    the round's first download flow (the later bursts there are the replies it pulls). Its end is
    fedgc's own: push + ``round_duration_s``."""
    # The transfers of the round's messages, not the app bundle or the small protocol messages.
    down_min = 0.5 * min(r["bytes_down"] / r["selected"] for r in rows)
    up_min = 0.5 * min(min(r["client_upload_bytes"]) for r in rows)
    # The app bundle, fetched before the first round, can be as large as a message: a client's downloads
    # are its last len(rows) flows.
    downs = {i: [f for f in flows if f.nbytes >= down_min][-len(rows):] for i, flows in downs.items()}
    ups = {i: [f for f in flows if f.nbytes >= up_min] for i, flows in ups.items()}
    if client_side is None:  # no delay: the client sees the transfers when the hub does
        client_downs, client_ups = downs, ups
    else:
        client_downs = {i: [f for f in flows if f.nbytes >= down_min][-len(rows):]
                        for i, flows in client_side[0].items()}
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
            # The ServerApp pulling the reply from the SuperLink: the first big loopback burst that ends
            # after the upload's last byte (replies pulled together share one burst).
            pull = next((f for f in pushes if f.nbytes >= up_min and f.end > u.end), None)
            clients.append({"node": i + 1, "pickup_s": d.start - push, "download_s": got - push,
                            "compute_s": sent - got, "upload_s": u.end - sent, "down_flow_s": got - d.start,
                            "last_byte_s": u.end - push, "collected_s": None if pull is None else pull.start - push,
                            "down_bytes": round(row["bytes_down"] / n),
                            "up_bytes": row["client_upload_bytes"][i],
                            "down_frame_bytes": d.nbytes, "up_frame_bytes": u.nbytes})
        rounds.append({"round": row["round"], "start_s": push - t0, "round_s": row["round_duration_s"],
                       "clients": clients})
    return {"rounds": rounds}


def round_trips(network: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
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
