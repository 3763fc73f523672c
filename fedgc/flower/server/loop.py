"""fedgc's round loop, the same on every engine (inline, Flower's simulation runtime, real SuperNodes).

One round, top to bottom (``run_rounds``): select among the online nodes and build the training
messages (strategy) → downlink stage (compressed downloads) → exchange (simulated network or measured
on a deployment) → confirm the downloads → aggregate → retry while too few updates → evaluate →
record → checkpoint. Every stateful part owns its ``state_dict()``; a checkpoint is all of them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import simpy
import torch
from flwr.app import ArrayRecord, Message, MessageType, RecordDict

from fedgc.aggregation.aggregators import AGGREGATORS
from fedgc.bounded import open_no_follow, replace_no_follow, writing
from fedgc.compress.base import DensePayload
from fedgc.compress.warmup import recorded_density
from fedgc.core import checkpoint
from fedgc.core.observe import ProgressObserver, RoundObserver
from fedgc.core.parts import build_model_for, density_schedule, federated_data, server_optimizer
from fedgc.core.records import Idle, client_rows, idle_reason, round_record
from fedgc.core.resume_check import scenario_record
from fedgc.core.stop import INTERRUPTED, StopRequest, clear_stop, stop_requests
from fedgc.core.threads import pin_threads
from fedgc.data import FederatedData
from fedgc.execution.device import deterministic_algorithms, resolve_device
from fedgc.execution.training import evaluate, samples_asked
from fedgc.flower import keys
from fedgc.flower.client_config import client_config_record
from fedgc.flower.keys import ReplyMetrics
from fedgc.flower.message_size import message_wire_size
from fedgc.flower.server.downlink_stage import DownlinkStage
from fedgc.flower.server.exchange import MeasuredExchange, SimulatedExchange
from fedgc.flower.server.strategy import Diverged, FedgcStrategy, SelectionPolicy
from fedgc.flower.transport import Transport
from fedgc.flower.update_record import encode_update
from fedgc.network.build import build_network
from fedgc.runs.metrics import FailureLog, MetricsLog, RoundsLog, Summary, read_rounds, write_summary
from fedgc.scenario.model import Scenario


def dense_reply_bytes(shapes: dict[str, tuple[int, ...]]) -> int:
    """Wire size of a reply carrying the same update as dense fp32 (same record layout and metrics)."""
    payloads = {n: DensePayload(torch.zeros(int(np.prod(s))), s) for n, s in shapes.items()}
    metrics = ReplyMetrics(num_examples=0, samples=0, steps=0, train_loss=0.0, elements_sent=0, elements_total=0)
    message = Message(RecordDict({keys.UPDATE: encode_update(payloads), keys.METRICS: metrics.to_record()}),
                      dst_node_id=0, message_type=MessageType.TRAIN)
    return message_wire_size(message)


def _note(observers: list[RoundObserver], line: str) -> None:
    for observer in observers:
        observer.note(line)


def _as_record(weights: dict[str, torch.Tensor]) -> ArrayRecord:
    return ArrayRecord({k: v.contiguous() for k, v in weights.items()})


def build_strategy(scenario: Scenario, data: FederatedData, shapes: dict[str, tuple[int, ...]],
                   policy: SelectionPolicy, total_nodes: int, optimizer, rng: np.random.Generator,
                   device: torch.device | None = None) -> FedgcStrategy:
    """The strategy that selects, builds the training messages (``configure``: each carries the
    scenario's client config, ``fedgc.flower.client_config``) and aggregates the replies."""
    s = scenario.strategy
    return FedgcStrategy(shapes=shapes, policy=policy, total_nodes=total_nodes, optimizer=optimizer, rng=rng,
                         density_for_round=density_schedule(scenario), max_num_examples=s.max_num_examples,
                         # With epochs, a deployed node's own data decides its steps: bounded by steps only.
                         max_samples=samples_asked(scenario, data) if scenario.client.local_steps else None,
                         clip_update_norm=s.clip_update_norm, norm_bound_factor=s.norm_bound_factor,
                         max_weight_share=s.max_weight_share,
                         aggregator=AGGREGATORS[s.aggregation].from_strategy(s), device=device,
                         client_config=client_config_record(scenario, data.input_shape, data.num_classes))


def run_rounds(transport: Transport, scenario: Scenario, out_dir: Path | None, *, measured: bool = False,
               observers: Sequence[RoundObserver] = (), resume: bool = False, graceful_stop: bool = False) -> Summary:
    """Run (or with ``resume``, continue from ``out_dir``'s checkpoint) the scenario's rounds through
    ``transport``; ``measured``: a real deployment (wall-clock exchange), else the simulated network.
    ``observers`` see each round (``fedgc.core.observe``: the progress line, plots, a callback).
    ``graceful_stop``: the first Ctrl-C or SIGTERM stops the run after its round, keeping its work
    (``fedgc.core.stop``)."""
    quiet = not any(isinstance(o, ProgressObserver) and o.enabled for o in observers)
    with deterministic_algorithms(scenario.deterministic), stop_requests(graceful_stop, quiet) as stop:
        stop.watch(out_dir)
        try:
            return _rounds(transport, scenario, out_dir, measured, list(observers), resume, stop)
        finally:
            clear_stop(out_dir)


def _rounds(transport: Transport, scenario: Scenario, out_dir: Path | None, measured: bool,
            observers: list[RoundObserver], resume: bool, stop: StopRequest) -> Summary:
    logging.getLogger("flwr").setLevel(logging.ERROR)
    pin_threads()  # aggregation and evaluation round alike on every engine
    wall_start = time.perf_counter()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    # The parts of the run, built from the scenario (the generators' order is part of the seed's meaning).
    data = federated_data(scenario)
    device = resolve_device(scenario.device)  # DeviceError (one line) before anything runs
    model = build_model_for(scenario, data)
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}  # on the CPU: sent from there
    model.to(device)  # the server's copy, for evaluation
    shapes = {k: tuple(v.shape) for k, v in weights.items()}
    nodes = sorted(transport.get_node_ids())
    rng = np.random.default_rng(scenario.seed)
    network = build_network(simpy.Environment(), scenario.network, nodes, np.random.default_rng(rng.integers(2**63)))
    s = scenario.strategy
    policy = SelectionPolicy(s.fraction, scenario.network.over_selection, s.min_clients,
                             retries=s.max_retries if s.too_few == "retry" else 0)
    keep_first = policy.wanted(len(nodes)) if scenario.network.over_selection > 1.0 else None
    exchange = (MeasuredExchange(deadline_s=scenario.network.deadline_s, keep_first=keep_first) if measured else
                SimulatedExchange(network, deadline_s=scenario.network.deadline_s, keep_first=keep_first,
                                  max_samples=samples_asked(scenario, data)))
    downlink = DownlinkStage(scenario.downlink, weights, scenario.seed) if scenario.downlink.enabled else None
    optimizer = server_optimizer(scenario)
    strategy = build_strategy(scenario, data, shapes, policy, len(nodes), optimizer,
                              np.random.default_rng(rng.integers(2**63)), device)
    # Every stateful part of the run, by its name in a checkpoint (None: not in this run). The
    # transport reports the clients' states: the inline grid holds them, the partition grid asks the nodes.
    parts = {"strategy": strategy, "optimizer": optimizer, "network": network, "downlink": downlink,
             "transport": transport}
    rounds_done, rows = 0, []
    if resume:
        if parts["transport"] is None or out_dir is None:
            raise checkpoint.CheckpointError("--resume needs a run folder and a transport that reports the clients' states")
        state = checkpoint.resumable(out_dir, scenario)
        checkpoint.restore(state, parts, shapes)
        rounds_done, weights = state["run"]["round"], dict(state["run"]["weights"])
        rows = read_rounds(out_dir / "metrics.jsonl", state["run"]["metrics_rows"])
        for stale in ("summary.json", "model.pt"):  # the run is open again: its results are not final
            (out_dir / stale).unlink(missing_ok=True)
    log = MetricsLog(out_dir / "metrics.jsonl" if out_dir else None, rows)
    failures = FailureLog(out_dir / "failures.jsonl" if out_dir else None, rounds_done if resume else None)
    clients = RoundsLog(out_dir / "clients.jsonl" if out_dir else None, rounds_done if resume else None)
    for observer in observers:
        observer.started(list(rows))
    dense_bytes = dense_reply_bytes(shapes)
    arrays = _as_record(weights)  # the global model as sent: one record shared by every message
    last_good = weights  # the newest global model that passed its checks (what model.pt keeps)
    stopped = "completed"
    try:
        for server_round in range(rounds_done + 1, scenario.rounds + 1):
            for attempt in range(policy.retries + 1):
                messages = strategy.configure(server_round, arrays, exchange.online(sorted(transport.get_node_ids())))
                if downlink is not None:  # nodes that announced no replica (query.partition, also late
                    # joiners) and hold none the server confirmed: their next download is the whole model
                    downlink.unsure |= {n for n in transport.nodes_without_replica() if n not in downlink.replicas}
                    downlink.settle_waiting(transport, {int(m.metadata.dst_node_id) for m in messages})
                downloads = downlink.encode(messages) if downlink is not None else None
                selected = [int(m.metadata.dst_node_id) for m in messages]  # the transport may relabel them
                exchanged = exchange.run(transport, messages) if messages else None
                strategy.pushed(dict(zip(selected, exchanged.ids)) if exchanged else {})
                strategy.acknowledge(exchanged.pulled if exchanged else [])
                if downloads is not None and exchanged is not None:
                    downlink.confirm(downloads, exchanged.ids, exchanged.pulled)
                report = strategy.aggregate(server_round, exchanged.replies if exchanged else [])
                if report.weights is not None:
                    weights, arrays = report.weights, _as_record(report.weights)
                retrying = report.weights is None and attempt < policy.retries
                traffic = exchanged.traffic if exchanged else None
                record = round_record(server_round, attempt, report.stats, traffic,
                                      log.rows[-1].sim_end_s if log.rows else 0.0, dense_bytes)
                if downloads is not None:
                    record.downlink_density, record.downlink_resets = downloads.density, downloads.resets
                record.density = recorded_density(scenario.compression, server_round)
                client_records = client_rows(server_round, attempt, selected, traffic, report.stats)
                clients.append_rows([asdict(row) for row in client_records])
                for failure in exchanged.traffic.failures if exchanged else []:
                    failures.append(server_round, attempt, failure.node_id, failure.error_type, failure.message)
                    if failures.count == 1:
                        _note(observers, f"warning: round {server_round}: client {failure.node_id} failed: "
                                      f"{failure.error_type}: {failure.message} (every failure: failures.jsonl)")
                if not retrying and (server_round % scenario.eval.every == 0 or server_round == scenario.rounds):
                    model.load_state_dict(weights)
                    record.accuracy, record.loss = evaluate(model, data.test, scenario.eval.batch_size)
                log.append(record)
                for observer in observers:
                    observer.round_done(record, client_records)
                if record.loss is not None and not math.isfinite(record.loss):
                    raise Diverged(f"round {server_round}: the global model's test loss is not finite")
                last_good = weights
                idle = idle_reason(log.rows, scenario.strategy.max_idle_rounds)
                if idle is not None:
                    raise Idle(idle)
                if not retrying:
                    break
            every = scenario.checkpoint_every
            interrupted = stop.asked and server_round < scenario.rounds
            # No checkpoint at the last round: a completed run is extended from its last checkpoint.
            # An interrupted run checkpoints the round it stopped after, whatever checkpoint_every says.
            if out_dir is not None and parts["transport"] is not None and (
                    interrupted or (every and server_round % every == 0 and server_round < scenario.rounds)):
                try:
                    state = {"run": checkpoint.run_state(server_round, len(log.rows), last_good),
                             **{name: part.state_dict() if part is not None else None for name, part in parts.items()}}
                except RuntimeError as err:  # a node of a deployment did not answer: keep the previous checkpoint
                    _note(observers, f"warning: round {server_round}: no checkpoint: {err}")
                else:
                    checkpoint.save(out_dir, state, scenario_record(scenario))
            if interrupted:
                stopped = INTERRUPTED
                break
    except Diverged as err:
        stopped = f"diverged: {err}"
    except Idle as err:
        stopped = f"idle: {err}"
    except BaseException:
        for observer in observers:
            observer.aborted()
        raise
    summary = log.summarize(scenario.name, scenario.eval.target_accuracy, time.perf_counter() - wall_start, stopped)
    if out_dir is not None:
        with writing(out_dir / "model.pt"):  # the final (or last good) global model, whole or not at all
            with open_no_follow(out_dir / "model.pt.tmp", "wb") as f:
                torch.save(last_good, f)
            replace_no_follow(out_dir / "model.pt.tmp", out_dir / "model.pt")
    for observer in observers:  # the plots among them: before the summary, which marks the folder complete
        observer.finished(summary, log.rows, last_good)
    if out_dir is not None:
        write_summary(out_dir / "summary.json", summary)  # last: its presence means the run folder is complete
    return summary
