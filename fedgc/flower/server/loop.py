"""fedgc's round loop, the same on every engine (inline, Flower's simulation runtime, real SuperNodes).

One round, top to bottom (``_rounds``): select among the online nodes and build the training
messages (strategy) → downlink stage (compressed downloads) → exchange (simulated network or measured
on a deployment) → confirm the downloads → aggregate → retry while too few updates → evaluate →
record → checkpoint. The run's Flower-free parts come from ``fedgc.core.parts.build_run`` (in the
order that is part of the seed's meaning); ``_Run`` adds the Flower stages and keeps the run's books.
Every stateful part owns its ``state_dict()``; a checkpoint is all of them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, MessageType, RecordDict

from fedgc.aggregation.aggregators import AGGREGATORS
from fedgc.bounded import open_no_follow, replace_no_follow, writing
from fedgc.compress.base import DensePayload
from fedgc.compress.warmup import recorded_density
from fedgc.core import checkpoint
from fedgc.core.observe import RoundObserver
from fedgc.core.parts import RunParts, SelectionPolicy, build_run, density_schedule
from fedgc.core.records import Idle, client_rows, idle_reason, round_record
from fedgc.core.resume_check import scenario_record
from fedgc.core.stop import INTERRUPTED, StopRequest, clear_stop, final_stopped_reason, stop_requests
from fedgc.core.threads import pin_threads
from fedgc.data import FederatedData
from fedgc.execution.device import deterministic_algorithms
from fedgc.execution.training import evaluate, samples_asked
from fedgc.flower import keys
from fedgc.flower.client_config import client_config_record
from fedgc.flower.keys import ReplyMetrics
from fedgc.flower.message_size import message_wire_size
from fedgc.flower.server.downlink_stage import DownlinkStage
from fedgc.flower.server.exchange import MeasuredExchange, SimulatedExchange
from fedgc.flower.server.strategy import Diverged, FedgcStrategy
from fedgc.flower.transport import Transport
from fedgc.flower.update_record import encode_update
from fedgc.runs.metrics import FailureLog, MetricsLog, RoundsLog, Summary, read_rounds, write_summary
from fedgc.scenario.model import Scenario


def dense_reply_bytes(shapes: dict[str, tuple[int, ...]]) -> int:
    """Wire size of a reply carrying the same update as dense fp32 (same record layout and metrics)."""
    payloads = {n: DensePayload(torch.zeros(int(np.prod(s))), s) for n, s in shapes.items()}
    metrics = ReplyMetrics(num_examples=0, samples=0, steps=0, train_loss=0.0, elements_sent=0, elements_total=0)
    message = Message(RecordDict({keys.UPDATE: encode_update(payloads), keys.METRICS: metrics.to_record()}),
                      dst_node_id=0, message_type=MessageType.TRAIN)
    return message_wire_size(message)


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
    def stopping() -> None:
        for observer in observers:
            observer.stopping()

    with deterministic_algorithms(scenario.deterministic), stop_requests(graceful_stop, stopping) as stop:
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
    run = _Run(transport, scenario, out_dir, build_run(scenario, sorted(transport.get_node_ids())), measured,
               observers, resume)
    stopped = "completed"
    try:
        for server_round in range(run.rounds_done + 1, scenario.rounds + 1):
            for attempt in range(run.parts.policy.retries + 1):
                if not run.attempt(server_round, attempt):  # False: the round is done (True: retry it)
                    break
            # An interrupted run checkpoints the round it stopped after, whatever checkpoint_every says.
            interrupted = stop.asked and server_round < scenario.rounds
            run.checkpoint(server_round, interrupted)
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
    return run.finish(final_stopped_reason(stopped, run.log.rows), time.perf_counter() - wall_start)


class _Run:
    """One run's Flower stages around its Flower-free parts, its global model and its books (the
    metrics, failures and clients files, the observers)."""

    def __init__(self, transport: Transport, scenario: Scenario, out_dir: Path | None, parts: RunParts,
                 measured: bool, observers: list[RoundObserver], resume: bool) -> None:
        self.transport, self.scenario, self.out_dir, self.parts, self.observers = (
            transport, scenario, out_dir, parts, observers)
        net = scenario.network
        self.exchange = (MeasuredExchange(deadline_s=net.deadline_s, keep_first=parts.keep_first) if measured else
                         SimulatedExchange(parts.network, deadline_s=net.deadline_s, keep_first=parts.keep_first,
                                           max_samples=parts.max_samples))
        self.downlink = (DownlinkStage(scenario.downlink, parts.weights, scenario.seed)
                         if scenario.downlink.enabled else None)
        self.strategy = build_strategy(scenario, parts.data, parts.shapes, parts.policy, len(parts.nodes),
                                       parts.optimizer, parts.selection_rng, parts.device)
        # Every stateful part of the run, by its name in a checkpoint (None: not in this run). The
        # transport reports the clients' states: the inline grid holds them, the partition grid asks the nodes.
        self.stateful = {"strategy": self.strategy, "optimizer": parts.optimizer, "network": parts.network,
                         "downlink": self.downlink, "transport": transport}
        self.rounds_done, self.weights, rows = 0, parts.weights, []
        if resume:
            self.rounds_done, self.weights, rows = self._resumed()
        kept = self.rounds_done if resume else None
        self.log = MetricsLog(out_dir / "metrics.jsonl" if out_dir else None, rows)
        self.failures = FailureLog(out_dir / "failures.jsonl" if out_dir else None, kept)
        self.clients = RoundsLog(out_dir / "clients.jsonl" if out_dir else None, kept)
        for observer in observers:
            observer.started(list(rows))
        self.dense_bytes = dense_reply_bytes(parts.shapes)
        self.arrays = _as_record(self.weights)  # the global model as sent: one record shared by every message
        self.last_good = self.weights  # the newest global model that passed its checks (what model.pt keeps)

    def _resumed(self) -> tuple[int, dict[str, torch.Tensor], list]:
        if self.out_dir is None:
            raise checkpoint.CheckpointError("--resume needs a run folder")
        state = checkpoint.resumable(self.out_dir, self.scenario)
        checkpoint.restore(state, self.stateful, self.parts.shapes)
        rows = read_rounds(self.out_dir / "metrics.jsonl", state["run"]["metrics_rows"])
        for stale in ("summary.json", "model.pt"):  # the run is open again: its results are not final
            (self.out_dir / stale).unlink(missing_ok=True)
        return state["run"]["round"], dict(state["run"]["weights"]), rows

    def attempt(self, server_round: int, attempt: int) -> bool:
        """One attempt at a round: select, download, exchange, aggregate, evaluate, record. True: too few
        updates, and a retry is left."""
        strategy, downlink, transport = self.strategy, self.downlink, self.transport
        messages = strategy.configure(server_round, self.arrays, self.exchange.online(sorted(transport.get_node_ids())))
        if downlink is not None:  # nodes that announced no replica (query.partition, also late joiners)
            # and hold none the server confirmed: their next download is the whole model
            downlink.unsure |= {n for n in transport.nodes_without_replica() if n not in downlink.replicas}
            downlink.settle_waiting(transport, {int(m.metadata.dst_node_id) for m in messages})
        downloads = downlink.encode(messages) if downlink is not None else None
        selected = [int(m.metadata.dst_node_id) for m in messages]  # the transport may relabel them
        exchanged = self.exchange.run(transport, messages) if messages else None
        strategy.pushed(dict(zip(selected, exchanged.ids)) if exchanged else {})
        strategy.acknowledge(exchanged.pulled if exchanged else [])
        if downlink is not None and downloads is not None and exchanged is not None:
            downlink.confirm(downloads, exchanged.ids, exchanged.pulled)
        report = strategy.aggregate(server_round, exchanged.replies if exchanged else [])
        if report.weights is not None:
            self.weights, self.arrays = report.weights, _as_record(report.weights)
        retrying = report.weights is None and attempt < self.parts.policy.retries
        traffic = exchanged.traffic if exchanged else None
        record = round_record(server_round, attempt, report.stats, traffic,
                              self.log.rows[-1].sim_end_s if self.log.rows else 0.0, self.dense_bytes)
        if downloads is not None:
            record.downlink_density, record.downlink_resets = downloads.density, downloads.resets
        record.density = recorded_density(self.scenario.compression, server_round)
        client_records = client_rows(server_round, attempt, selected, traffic, report.stats)
        self.clients.append_rows([asdict(row) for row in client_records])
        for failure in traffic.failures if traffic else []:
            self.failures.append(server_round, attempt, failure.node_id, failure.error_type, failure.message)
            if self.failures.count == 1:
                self._note(f"warning: round {server_round}: client {failure.node_id} failed: "
                           f"{failure.error_type}: {failure.message} (every failure: failures.jsonl)")
        if not retrying and (server_round % self.scenario.eval.every == 0 or server_round == self.scenario.rounds):
            self.parts.model.load_state_dict(self.weights)
            record.accuracy, record.loss = evaluate(self.parts.model, self.parts.data.test, self.scenario.eval.batch_size)
        self.log.append(record)
        for observer in self.observers:
            observer.round_done(record, client_records)
        if record.loss is not None and not math.isfinite(record.loss):
            raise Diverged(f"round {server_round}: the global model's test loss is not finite")
        self.last_good = self.weights
        idle = idle_reason(self.log.rows, self.scenario.strategy.max_idle_rounds)
        if idle is not None:
            raise Idle(idle)
        return retrying

    def checkpoint(self, server_round: int, interrupted: bool) -> None:
        """Every ``checkpoint_every`` rounds, and after the round an interrupted run stopped after. None
        at the last round: a completed run is extended from its last checkpoint."""
        every, rounds = self.scenario.checkpoint_every, self.scenario.rounds
        if self.out_dir is None or not (interrupted or (every and server_round % every == 0 and server_round < rounds)):
            return
        try:
            state = {"run": checkpoint.run_state(server_round, len(self.log.rows), self.last_good),
                     **{name: part.state_dict() if part is not None else None for name, part in self.stateful.items()}}
        except RuntimeError as err:  # a node of a deployment did not answer: keep the previous checkpoint
            self._note(f"warning: round {server_round}: no checkpoint: {err}")
        else:
            checkpoint.save(self.out_dir, state, scenario_record(self.scenario))

    def finish(self, stopped: str, wall_s: float) -> Summary:
        """The summary; in a run folder, ``model.pt``, the observers' outputs, then ``summary.json``."""
        summary = self.log.summarize(self.scenario.name, self.scenario.eval.target_accuracy, wall_s, stopped)
        out_dir = self.out_dir
        if out_dir is not None:
            with writing(out_dir / "model.pt"):  # the final (or last good) global model, whole or not at all
                with open_no_follow(out_dir / "model.pt.tmp", "wb") as f:
                    torch.save(self.last_good, f)
                replace_no_follow(out_dir / "model.pt.tmp", out_dir / "model.pt")
        for observer in self.observers:  # the plots among them: before the summary, which marks the folder complete
            observer.finished(summary, self.log.rows, self.last_good)
        if out_dir is not None:
            write_summary(out_dir / "summary.json", summary)  # last: its presence means the run folder is complete
        return summary

    def _note(self, line: str) -> None:
        for observer in self.observers:
            observer.note(line)
