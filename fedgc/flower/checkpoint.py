"""Resumable run state: everything a run needs to continue exactly where it stopped.

A checkpoint holds the global model, the server optimizer's buffers, the strategy's random generator
and acknowledgement book, the network model (links, devices, availability and the simulated clock),
every client's ``Context.state`` (compression memory, pending updates, downlink replica) and, with
downlink compression, the server's per-client replicas. It is written to
``checkpoint.pt.tmp``, flushed to disk and renamed over ``checkpoint.pt``: a crash at any moment
leaves either the previous checkpoint or the new one, never a torn file.

Resuming needs the clients' states, which only the inline engine holds in this process; on Flower's
own runtimes the nodes keep their state themselves.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import simpy
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord, RecordDict

from fedgc.network.timeline import NetworkModel

CHECKPOINT = "checkpoint.pt"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A run folder cannot be resumed; ``str(err)`` is one line."""


@dataclass
class RunState:
    round: int  # rounds completed
    metrics_rows: int  # rows of metrics.jsonl up to this checkpoint (a retried round has a row per attempt)
    weights: dict[str, torch.Tensor]
    optimizer_buffers: dict[str, torch.Tensor]
    strategy_rng: dict
    applied_since_last_message: dict[int, list[int]]
    network: bytes  # the pickled NetworkModel, its simpy Environment detached
    sim_now: float
    client_states: dict[int, dict] = field(default_factory=dict)
    next_message_id: int = 0
    downlink: dict | None = None  # the server's downlink replicas (DownlinkGrid.state), when compressed


def pickle_network(network: NetworkModel) -> tuple[bytes, float]:
    """simpy's Environment does not survive pickling; the clock's time is all it carries between rounds."""
    env = network.env
    network.env = None
    try:
        return pickle.dumps(network, protocol=pickle.HIGHEST_PROTOCOL), float(env.now)
    finally:
        network.env = env


def unpickle_network(blob: bytes, sim_now: float) -> NetworkModel:
    network = pickle.loads(blob)  # our own file, written by this module
    network.env = simpy.Environment(initial_time=sim_now)
    return network


def context_state(context: Context) -> dict:
    """A ``Context.state`` as plain tensors and values (what ``torch.save`` stores)."""
    state = context.state
    return {
        "arrays": {k: dict(r.to_torch_state_dict()) for k, r in state.array_records.items()},
        "configs": {k: dict(r) for k, r in state.config_records.items()},
        "metrics": {k: dict(r) for k, r in state.metric_records.items()},
    }


def restore_context_state(context: Context, saved: dict) -> None:
    state = RecordDict()
    for key, tensors in saved["arrays"].items():
        state[key] = ArrayRecord({k: v.contiguous() for k, v in tensors.items()})
    for key, values in saved["configs"].items():
        state[key] = ConfigRecord(values)
    for key, values in saved["metrics"].items():
        state[key] = MetricRecord(values)
    context.state = state


def save(run_dir: Path, state: RunState) -> Path:
    path = run_dir / CHECKPOINT
    tmp = run_dir / (CHECKPOINT + ".tmp")
    payload = {"format": FORMAT_VERSION, **state.__dict__}
    with tmp.open("wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the new one
    return path


def load(run_dir: Path) -> RunState:
    path = run_dir / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(f"--resume {run_dir}: no {CHECKPOINT} in that folder (checkpoint_every=0, "
                              "or the run stopped before its first checkpoint)")
    try:
        payload = torch.load(path, weights_only=False)
    except Exception as err:  # noqa: BLE001 — any unreadable file gets the same one-line answer
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} is unreadable ({type(err).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} has an unknown format")
    payload.pop("format")
    return RunState(**payload)


def capture(completed_round: int, metrics_rows: int, weights: dict[str, torch.Tensor], strategy,
            network: NetworkModel, inline_grid, downlink=None) -> RunState:
    """The state after ``completed_round`` (``weights``: the global model then); ``inline_grid`` holds
    the clients' contexts."""
    blob, now = pickle_network(network)
    return RunState(
        round=completed_round,
        metrics_rows=metrics_rows,
        weights={k: v.clone() for k, v in weights.items()},
        optimizer_buffers={k: v.clone() for k, v in strategy.optimizer.buffers.items()},
        strategy_rng=strategy.rng.bit_generator.state,
        applied_since_last_message={n: list(r) for n, r in strategy.applied_since_last_message.items()},
        network=blob,
        sim_now=now,
        client_states={node: context_state(ctx) for node, ctx in inline_grid.contexts.items() if len(ctx.state)},
        next_message_id=inline_grid.next_message_id,
        downlink=downlink.state() if downlink is not None else None,
    )


def restore(state: RunState, strategy, inline_grid, downlink=None) -> NetworkModel:
    """Put a checkpoint back into a freshly built strategy and grid; returns the network model."""
    strategy.round_offset = state.round
    strategy.final_weights = dict(state.weights)
    strategy.optimizer.buffers = dict(state.optimizer_buffers)
    strategy.rng.bit_generator.state = state.strategy_rng
    strategy.applied_since_last_message.clear()
    strategy.applied_since_last_message.update({n: list(r) for n, r in state.applied_since_last_message.items()})
    unknown = set(state.client_states) - set(inline_grid.contexts)
    if unknown:
        raise CheckpointError(f"checkpoint holds state for node {min(unknown)}, which this scenario does not have")
    for node, saved in state.client_states.items():
        restore_context_state(inline_grid.contexts[node], saved)
    inline_grid.next_message_id = state.next_message_id
    if (state.downlink is None) != (downlink is None):
        raise CheckpointError("the checkpoint and the scenario disagree on downlink compression")
    if downlink is not None:
        downlink.load_state(state.downlink)
    return unpickle_network(state.network, state.sim_now)
