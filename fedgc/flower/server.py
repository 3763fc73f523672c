"""The server side of a run, shared by every engine: build the strategy and the simulated network
around whatever ``Grid`` the engine provides, run the rounds, and record metrics and the summary."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import numpy as np
import simpy
import torch
from flwr.app import ArrayRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid

from fedgc.compress.base import DensePayload
from fedgc.flower import checkpoint
from fedgc.flower.codec import encode_update
from fedgc.flower.downlink_grid import DownlinkGrid, DownlinkRound
from fedgc.flower.inline_grid import InlineGrid
from fedgc.flower.network_grid import NetworkGrid
from fedgc.flower.setup import federated_data
from fedgc.flower.strategy import Diverged, FedgcStrategy, SelectionPolicy
from fedgc.flower.wire import message_wire_size
from fedgc.metrics import MetricsLog, RoundRecord, Summary, read_rows, write_summary
from fedgc.models import build_model
from fedgc.network.build import build_network
from fedgc.progress import Progress
from fedgc.scenario import Scenario
from fedgc.server_optim import ServerOptimizer
from fedgc.training import evaluate


def dense_reply_bytes(shapes: dict[str, tuple[int, ...]]) -> int:
    """Wire size of a reply carrying the same update as dense fp32 (same record layout and metrics)."""
    payloads = {n: DensePayload(torch.zeros(int(np.prod(s))), s) for n, s in shapes.items()}
    metrics = MetricRecord({"num-examples": 0, "samples": 0, "steps": 0, "train-loss": 0.0,
                            "elements-sent": 0, "elements-total": 0})
    message = Message(RecordDict({"update": encode_update(payloads), "metrics": metrics}),
                      dst_node_id=0, message_type=MessageType.TRAIN)
    return message_wire_size(message)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


class RunComplete(Exception):
    """The last round is done; ends Flower's loop early (it was sized for the worst case of retries)."""


def density_schedule(scenario: Scenario):
    from fedgc.compress.warmup import warmup_density

    c = scenario.compression
    return lambda server_round: warmup_density(server_round, c.warmup_rounds, c.density)


def run_server(grid: Grid, scenario: Scenario, out_dir: Path | None, *, quiet: bool = False,
               resume: bool = False) -> Summary:
    """Run (or with ``resume``, continue from ``out_dir``'s checkpoint) the scenario's rounds on ``grid``."""
    logging.getLogger("flwr").setLevel(logging.ERROR)
    wall_start = time.perf_counter()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    data = federated_data(scenario)
    model = build_model(scenario.model.name, data.input_shape, data.num_classes, scenario.seed,
                        options=scenario.model.options)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    shapes = {k: tuple(v.shape) for k, v in initial.items()}
    node_ids = sorted(grid.get_node_ids())
    rng = np.random.default_rng(scenario.seed)
    env = simpy.Environment()
    network = build_network(env, scenario.network, node_ids, np.random.default_rng(rng.integers(2**63)))
    policy = SelectionPolicy(scenario.strategy.fraction, scenario.network.over_selection, scenario.strategy.min_clients,
                             retries=scenario.strategy.max_retries if scenario.strategy.too_few == "retry" else 0)
    keep_first = policy.wanted(len(node_ids)) if scenario.network.over_selection > 1.0 else None
    downlink = (DownlinkGrid(grid, scenario.downlink, initial, scenario.seed)
                if scenario.downlink.enabled else None)
    net_grid = NetworkGrid(downlink or grid, network, deadline_s=scenario.network.deadline_s, keep_first=keep_first)
    s = scenario.strategy
    optimizer = ServerOptimizer(kind=s.server_optimizer, lr=s.server_lr, momentum=s.server_momentum,
                                beta1=s.adam_beta1, beta2=s.adam_beta2, tau=s.adam_tau)
    strategy = FedgcStrategy(shapes=shapes, policy=policy, total_nodes=len(node_ids), optimizer=optimizer,
                             rng=np.random.default_rng(rng.integers(2**63)), density_for_round=density_schedule(scenario),
                             max_num_examples=s.max_num_examples, clip_update_norm=s.clip_update_norm)
    dense_bytes = dense_reply_bytes(shapes)
    inline = grid if isinstance(grid, InlineGrid) else None
    rounds_done, rows = 0, []
    if resume:
        if inline is None or out_dir is None:
            raise checkpoint.CheckpointError("--resume works with the inline engine only "
                                             "(on Flower's runtimes the nodes hold their own state)")
        state = checkpoint.load(out_dir)
        net_grid.network = checkpoint.restore(state, strategy, inline, downlink)
        rounds_done, rows = state.round, read_rows(out_dir / "metrics.jsonl", state.metrics_rows)
        initial = strategy.final_weights
    log = MetricsLog(out_dir / "metrics.jsonl" if out_dir else None, rows)
    progress = Progress(scenario.rounds, enabled=not quiet, history=rows)

    def evaluate_fn(loop_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        if loop_round == 0:
            return None
        server_round = strategy.current_round
        traffic, stats = net_grid.last_round, strategy.last_stats
        record = RoundRecord(round=server_round, skipped=stats.skipped, attempt=stats.attempt)
        if traffic is None:  # nobody was selected: no time passed in this round
            record.sim_start_s = record.sim_end_s = log.rows[-1].sim_end_s if log.rows else 0.0
        else:
            timeline = traffic.timeline
            record.sim_start_s, record.sim_end_s = timeline.start, timeline.end
            record.round_duration_s = timeline.end - timeline.start
            record.selected, record.failed = traffic.selected, traffic.failed
            record.completed, record.cut, record.late = (timeline.count(k) for k in ("completed", "cut", "late"))
            record.bytes_down, record.bytes_up = traffic.bytes_down, traffic.bytes_up
            record.dense_bytes_up = dense_bytes * record.completed
            done = [t for t in timeline.timings if t.status == "completed"]
            record.mean_download_s = _mean([t.downloaded - t.start for t in done])
            record.mean_compute_s = _mean([t.computed - t.downloaded for t in done])
            uploads = [t.uploaded - t.computed for t in done]
            record.mean_upload_s, record.max_upload_s = _mean(uploads), (max(uploads) if uploads else None)
            record.client_upload_bytes = [traffic.upload_bytes[t.node_id] for t in done]
            record.client_upload_s = uploads
        if downlink is not None:
            record.downlink_density, record.downlink_resets = downlink.last_round.density, downlink.last_round.resets
        record.rejected = sum(stats.rejected.values())
        record.rejected_reasons = dict(sorted(stats.rejected.items()))
        record.applied = len(stats.applied_nodes)
        record.applied_nodes = sorted(stats.applied_nodes)
        record.train_loss, record.achieved_density = stats.train_loss, stats.achieved_density
        record.density = float(strategy.density_for_round(server_round))
        if not stats.retrying and (server_round % scenario.eval.every == 0 or server_round == scenario.rounds):
            model.load_state_dict(arrays.to_torch_state_dict())
            record.accuracy, record.loss = evaluate(model, data.test, scenario.eval.batch_size)
        log.append(record)
        net_grid.last_round = None  # what the next round sends is recorded anew, even if it sends nothing
        if downlink is not None:
            downlink.last_round = DownlinkRound()
        progress.update(record, sum(r.bytes_up for r in log.rows))
        if record.loss is not None and not math.isfinite(record.loss):
            raise Diverged(f"round {server_round}: the global model's test loss is not finite")
        last_good["weights"] = strategy.final_weights or initial
        if stats.retrying:
            return None
        if server_round == scenario.rounds:
            raise RunComplete  # Flower's loop may have iterations left for retries that were not needed
        every = scenario.checkpoint_every
        if inline is not None and out_dir is not None and every and server_round % every == 0:
            checkpoint.save(out_dir, checkpoint.capture(server_round, len(log.rows), last_good["weights"], strategy,
                                                        net_grid.network, inline, downlink))
        return MetricRecord({"accuracy": record.accuracy}) if record.accuracy is not None else None

    last_good = {"weights": initial}  # the newest global model that passed its checks (what model.pt keeps)
    stopped = "completed"
    try:
        strategy.start(grid=net_grid, initial_arrays=ArrayRecord({k: v.contiguous() for k, v in initial.items()}),
                       num_rounds=(scenario.rounds - rounds_done) * (1 + policy.retries), evaluate_fn=evaluate_fn)
    except RunComplete:
        pass
    except Diverged as err:
        stopped = f"diverged: {err}"
    finally:
        progress.close()
    summary = log.summarize(scenario.name, scenario.eval.target_accuracy, time.perf_counter() - wall_start, stopped)
    if out_dir is not None:
        write_summary(out_dir / "summary.json", summary)
        torch.save(last_good["weights"], out_dir / "model.pt")  # the final (or last good) global model
        from fedgc.plots import plot_run

        plot_run(log.rows, out_dir / "plots", title=scenario.name)
    return summary
