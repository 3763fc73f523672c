"""fedgc's Flower strategy: FedAvg's loop, with seeded selection among online clients, per-client
acknowledgements of applied updates, validated sparse decoding, weighted scatter-add aggregation and a
server optimizer. Like Flower's ``FedAvgM`` it changes only what it must: ``configure_train`` and
``aggregate_train``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg

from fedgc.compress.base import Payload, decompress
from fedgc.flower.aggregate import aggregate_payloads
from fedgc.flower.codec import CodecError, decode_update
from fedgc.server_optim import ServerOptimizer


@dataclass
class AggregationStats:
    """What ``aggregate_train`` did in the last round (read by the server's recorder)."""

    received: int = 0
    applied_nodes: list[int] = field(default_factory=list)
    rejected: Counter = field(default_factory=Counter)
    train_loss: float | None = None
    achieved_density: float | None = None
    skipped: bool = False
    retrying: bool = False  # skipped, and the same round runs again
    attempt: int = 0  # 0: the round's first attempt; k: its k-th retry


@dataclass
class ClientUpdate:
    """A reply that passed validation."""

    node: int
    num_examples: int
    payloads: dict[str, Payload]
    metrics: MetricRecord
    scale: float = 1.0  # < 1 when the server bounded this update's norm


class Diverged(RuntimeError):
    """The global model became non-finite; the run stops and keeps the last good model."""


@dataclass
class SelectionPolicy:
    fraction: float
    over_selection: float = 1.0
    min_clients: int = 1
    retries: int = 0  # attempts after the first for a round with fewer than min_clients updates

    def wanted(self, total_nodes: int) -> int:
        """K: updates aggregated per round."""
        return max(1, round(self.fraction * total_nodes))

    def to_select(self, total_nodes: int) -> int:
        return math.ceil(self.over_selection * self.wanted(total_nodes))


class FedgcStrategy(FedAvg):
    def __init__(self, *, shapes: dict[str, tuple[int, ...]], policy: SelectionPolicy, total_nodes: int,
                 optimizer: ServerOptimizer, rng: np.random.Generator, density_for_round,
                 max_num_examples: int = 10_000_000, max_update_bytes: int | None = None,
                 clip_update_norm: float | None = None) -> None:
        super().__init__(fraction_train=policy.fraction, fraction_evaluate=0.0, min_train_nodes=1,
                         min_available_nodes=1)
        self.shapes = shapes
        self.policy = policy
        self.total_nodes = total_nodes
        self.optimizer = optimizer
        self.rng = rng
        self.density_for_round = density_for_round
        self.max_num_examples = max_num_examples
        dense_bytes = 4 * sum(int(np.prod(shape)) for shape in shapes.values())
        # A well-formed update is never larger than dense fp32 plus its index blocks.
        self.max_update_bytes = max_update_bytes or 2 * dense_bytes + 1_000_000
        self.clip_update_norm = clip_update_norm
        self._selected: set[int] = set()
        self.applied_since_last_message: dict[int, list[int]] = defaultdict(list)
        self.last_stats = AggregationStats()
        self._weights: dict[str, torch.Tensor] = {}
        self.final_weights: dict[str, torch.Tensor] = {}
        # Server round = Flower's loop round + offset: rounds done before this process started (a
        # resumed run), minus the loop rounds spent on retries.
        self.round_offset = 0
        self.current_round = 0
        self.attempt = 0  # retries of the current round so far

    def summary(self) -> None:
        return None

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        server_round += self.round_offset
        self.current_round = server_round
        self._weights = {k: v.to(torch.float32) for k, v in arrays.to_torch_state_dict().items()}
        online = sorted(grid.get_node_ids())
        count = min(len(online), self.policy.to_select(self.total_nodes))
        selected = sorted(int(n) for n in self.rng.choice(online, size=count, replace=False)) if count else []
        self._selected = set(selected)
        messages = []
        for node in selected:
            node_config = ConfigRecord(dict(config))
            node_config["server-round"] = server_round
            node_config["density"] = float(self.density_for_round(server_round))
            node_config["num-clients"] = self.policy.wanted(self.total_nodes)
            node_config["applied-rounds"] = list(self.applied_since_last_message.pop(node, []))
            content = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: node_config})
            messages.append(Message(content=content, message_type=MessageType.TRAIN, dst_node_id=node))
        return messages

    def _check_metrics(self, metrics: MetricRecord | None) -> int:
        if metrics is None:
            raise CodecError("missing-metrics", "reply has no 'metrics' record")
        n = metrics.get("num-examples")
        if not isinstance(n, (int, float)) or isinstance(n, bool) or not math.isfinite(n):
            raise CodecError("bad-num-examples", "num-examples missing or not a number")
        if not 0 < n <= self.max_num_examples:
            raise CodecError("bad-num-examples", f"num-examples={n} outside (0, {self.max_num_examples}]")
        for key in ("train-loss", "elements-sent", "elements-total"):
            value = metrics.get(key, 0.0)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise CodecError("bad-metrics", f"{key} is not a finite number")
        return int(n)

    def _validate(self, reply: Message, selected: set[int], seen: set[int]) -> ClientUpdate:
        """Decode one reply or raise ``CodecError``; nothing here touches the model."""
        node = reply.metadata.src_node_id
        if node not in selected:
            raise CodecError("unexpected-sender", f"node {node} was not selected this round")
        if node in seen:
            raise CodecError("duplicate-reply", f"node {node} replied twice")
        metrics = reply.content.metric_records.get("metrics")
        n = self._check_metrics(metrics)
        update = reply.content.array_records.get("update")
        if update is None:
            raise CodecError("missing-update", "reply has no 'update' record")
        if update.count_bytes() > self.max_update_bytes:
            raise CodecError("too-large", f"update holds {update.count_bytes()} bytes > {self.max_update_bytes}")
        payloads = decode_update(update, self.shapes)
        scale = 1.0
        if self.clip_update_norm is not None:
            norm = math.sqrt(sum(float(decompress(p).double().pow(2).sum()) for p in payloads.values()))
            scale = min(1.0, self.clip_update_norm / norm) if norm > 0 else 1.0
        return ClientUpdate(node, n, payloads, metrics, scale)

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        server_round += self.round_offset
        stats = AggregationStats(attempt=self.attempt)
        accepted: list[ClientUpdate] = []
        seen: set[int] = set()
        for reply in replies:
            if reply.has_error():
                continue
            stats.received += 1
            try:
                update = self._validate(reply, self._selected, seen)
            except CodecError as err:
                stats.rejected[err.reason] += 1
                continue
            seen.add(update.node)
            accepted.append(update)
        self.last_stats = stats
        if len(accepted) < self.policy.min_clients:
            stats.skipped = True
            if self.attempt < self.policy.retries:
                stats.retrying = True
                self.attempt += 1
                self.round_offset -= 1  # the next loop round runs this server round again
            else:
                self.attempt = 0
            return None, None
        self.attempt = 0
        total = sum(u.num_examples for u in accepted)
        delta = aggregate_payloads([(u.num_examples / total * u.scale, u.payloads) for u in accepted], self.shapes)
        new_weights = self.optimizer.step(self._weights, delta)
        bad = [name for name, w in new_weights.items() if not torch.isfinite(w).all()]
        if bad:
            raise Diverged(f"round {server_round}: the global model became non-finite in {bad[0]}")
        self.final_weights = new_weights
        for u in accepted:
            self.applied_since_last_message[u.node].append(server_round)
        stats.applied_nodes = [u.node for u in accepted]
        stats.train_loss = sum(u.num_examples * float(u.metrics.get("train-loss", 0.0)) for u in accepted) / total
        sent = sum(float(u.metrics.get("elements-sent", 0)) for u in accepted)
        numel = sum(float(u.metrics.get("elements-total", 0)) for u in accepted)
        stats.achieved_density = sent / numel if numel else None
        record = ArrayRecord({k: v.contiguous() for k, v in new_weights.items()})
        return record, MetricRecord({"train-loss": stats.train_loss, "applied": len(accepted)})
