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


@dataclass
class SelectionPolicy:
    fraction: float
    over_selection: float = 1.0
    min_clients: int = 1

    def wanted(self, total_nodes: int) -> int:
        """K: updates aggregated per round."""
        return max(1, round(self.fraction * total_nodes))

    def to_select(self, total_nodes: int) -> int:
        return math.ceil(self.over_selection * self.wanted(total_nodes))


class FedgcStrategy(FedAvg):
    def __init__(self, *, shapes: dict[str, tuple[int, ...]], policy: SelectionPolicy, total_nodes: int,
                 optimizer: ServerOptimizer, rng: np.random.Generator, density_for_round,
                 max_num_examples: int = 10_000_000) -> None:
        super().__init__(fraction_train=policy.fraction, fraction_evaluate=0.0, min_train_nodes=1,
                         min_available_nodes=1)
        self.shapes = shapes
        self.policy = policy
        self.total_nodes = total_nodes
        self.optimizer = optimizer
        self.rng = rng
        self.density_for_round = density_for_round
        self.max_num_examples = max_num_examples
        self.applied_since_last_message: dict[int, list[int]] = defaultdict(list)
        self.last_stats = AggregationStats()
        self._weights: dict[str, torch.Tensor] = {}
        self.final_weights: dict[str, torch.Tensor] = {}

    def summary(self) -> None:
        return None

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._weights = {k: v.to(torch.float32) for k, v in arrays.to_torch_state_dict().items()}
        online = sorted(grid.get_node_ids())
        count = min(len(online), self.policy.to_select(self.total_nodes))
        selected = sorted(int(n) for n in self.rng.choice(online, size=count, replace=False)) if count else []
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
        return int(n)

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        stats = AggregationStats()
        accepted: list[tuple[int, int, dict, MetricRecord]] = []
        for reply in replies:
            if reply.has_error():
                continue
            stats.received += 1
            try:
                metrics = reply.content.metric_records.get("metrics")
                n = self._check_metrics(metrics)
                update = reply.content.array_records.get("update")
                if update is None:
                    raise CodecError("missing-update", "reply has no 'update' record")
                payloads = decode_update(update, self.shapes)
            except CodecError as err:
                stats.rejected[err.reason] += 1
                continue
            accepted.append((reply.metadata.src_node_id, n, payloads, metrics))
        self.last_stats = stats
        if len(accepted) < self.policy.min_clients:
            stats.skipped = True
            return None, None
        total = sum(n for _, n, _, _ in accepted)
        delta = aggregate_payloads([(n / total, payloads) for _, n, payloads, _ in accepted], self.shapes)
        new_weights = self.optimizer.step(self._weights, delta)
        self.final_weights = new_weights
        for node, _, _, _ in accepted:
            self.applied_since_last_message[node].append(server_round)
        stats.applied_nodes = [node for node, _, _, _ in accepted]
        stats.train_loss = sum(n * float(m.get("train-loss", 0.0)) for _, n, _, m in accepted) / total
        sent = sum(float(m.get("elements-sent", 0)) for *_, m in accepted)
        numel = sum(float(m.get("elements-total", 0)) for *_, m in accepted)
        stats.achieved_density = sent / numel if numel else None
        record = ArrayRecord({k: v.contiguous() for k, v in new_weights.items()})
        return record, MetricRecord({"train-loss": stats.train_loss, "applied": len(accepted)})
