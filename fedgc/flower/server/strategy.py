"""fedgc's Flower strategy: seeded selection among online clients, per-client acknowledgements of
applied updates, validated sparse decoding, weighted scatter-add (or robust) aggregation and a server
optimizer. fedgc's round loop (``fedgc.flower.server.loop``) calls ``configure`` and ``aggregate``; Flower's
``configure_train`` / ``aggregate_train`` wrap them, so the strategy also runs under Flower's own
``Strategy.start``. It keeps no per-round results for others to read: ``aggregate`` returns them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg

from fedgc.aggregation.aggregators import ROBUST_MIN_UPDATES, AcceptedUpdate, Aggregator, Mean
from fedgc.aggregation.server_optim import ServerOptimizer
from fedgc.compress.aggregate import aggregate_payloads, capped_shares, norm_bounds
from fedgc.compress.base import Payload
from fedgc.core.parts import SelectionPolicy
from fedgc.core.records import AggregationStats
from fedgc.flower import keys
from fedgc.flower.server.validate import (
    MAX_REPLY_EXTRA_BYTES,
    check_consistency,
    check_metrics,
    check_reply_to,
    elements,
    reply_content_bytes,
    reported_norms,
    update_norm,
)
from fedgc.flower.update_record import CodecError, decode_update, update_bytes, update_record
from fedgc.plugins.import_paths import PluginError


@dataclass
class AggregationReport:
    """``weights``: the new global model, or None when the attempt applied nothing."""

    stats: AggregationStats
    weights: dict[str, torch.Tensor] | None = None


@dataclass
class ClientUpdate:
    """A reply that passed validation."""

    node: int
    num_examples: int
    payloads: dict[str, Payload]
    metrics: MetricRecord
    norm: float = 0.0  # L2 norm of the decoded update


class Diverged(RuntimeError):
    """The global model became non-finite; the run stops and keeps the last good model."""


class FedgcStrategy(FedAvg):
    def __init__(self, *, shapes: dict[str, tuple[int, ...]], policy: SelectionPolicy, total_nodes: int,
                 optimizer: ServerOptimizer, rng: np.random.Generator, density_for_round,
                 max_num_examples: int = 10_000_000, max_samples: int | None = None,
                 clip_update_norm: float | None = None, norm_bound_factor: float | None = 5.0,
                 max_weight_share: float = 0.5, aggregator: Aggregator | None = None,
                 client_config: ConfigRecord | None = None, device: torch.device | None = None) -> None:
        super().__init__(fraction_train=policy.fraction, fraction_evaluate=0.0, min_train_nodes=1,
                         min_available_nodes=1)
        self.shapes = shapes
        self.policy = policy
        self.total_nodes = total_nodes
        self.optimizer = optimizer
        self.rng = rng
        self.density_for_round = density_for_round
        self.max_num_examples = max_num_examples
        self.max_samples = max_samples  # the most samples a train message asks for (None: unbounded)
        dense_bytes = 4 * sum(int(np.prod(shape)) for shape in shapes.values())
        # A well-formed update is never larger than dense fp32 plus its index blocks.
        self.max_update_bytes = 2 * dense_bytes + 1_000_000
        self.clip_update_norm = clip_update_norm
        self.norm_bound_factor = norm_bound_factor
        self.max_weight_share = max_weight_share
        # fedgc.aggregation.aggregators: mean, median, trimmed_mean or a user's rule
        self.aggregator = aggregator if aggregator is not None else Mean()
        # The client-config record every training message carries (keys.CLIENT_CONFIG; None: none).
        self.client_config = client_config
        # Where the aggregate, the server optimizer and its state live (the scenario's device); the
        # model goes out and comes back as host arrays, so the rest of the run never sees the device.
        self.device = torch.device("cpu") if device is None else device
        # The attempt in progress: the message sent to each selected node (the transport writes its id
        # into it when it pushes it) and the global model it carried, for validating the replies.
        self._sent: dict[int, Message] = {}
        self._sent_ids: dict[int, str] = {}  # node -> the id its message was pushed under (``pushed``)
        self._weights: dict[str, torch.Tensor] = {}
        self.applied_since_last_message: dict[int, list[int]] = defaultdict(list)

    def state_dict(self) -> dict:
        """The selection generator and which applied rounds each node has not been told of yet."""
        return {"rng": self.rng.bit_generator.state,
                "applied_since_last_message": {n: list(r) for n, r in self.applied_since_last_message.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.applied_since_last_message.clear()
        self.applied_since_last_message.update({n: list(r) for n, r in state["applied_since_last_message"].items()})

    def summary(self) -> None:
        return None

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        return self.configure(server_round, arrays, sorted(grid.get_node_ids()), config)

    def configure(self, server_round: int, arrays: ArrayRecord, online: list[int],
                  config: ConfigRecord | None = None) -> list[Message]:
        """Select among the ``online`` nodes (seeded) and build one training message for each."""
        config = config if config is not None else ConfigRecord()
        self._weights = {k: v.to(device=self.device, dtype=torch.float32) for k, v in arrays.to_torch_state_dict().items()}
        # More nodes online than the run started with: a deployment's late joiners count in.
        population = max(self.total_nodes, len(online))
        count = min(len(online), self.policy.to_select(population))
        selected = sorted(int(n) for n in self.rng.choice(online, size=count, replace=False)) if count else []
        self._sent, self._sent_ids = {}, {}
        messages = []
        for node in selected:
            node_config = ConfigRecord(dict(config))
            node_config[keys.SERVER_ROUND] = server_round
            node_config[keys.DENSITY] = float(self.density_for_round(server_round))
            node_config[keys.NUM_CLIENTS] = self.policy.wanted(population)
            # Listed until the node answers this message (``acknowledge``): a message that never
            # reaches it must not lose the list, or the node would restore an applied update.
            node_config[keys.APPLIED_ROUNDS] = list(self.applied_since_last_message.get(node, []))
            content = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: node_config})
            if self.client_config is not None:
                content[keys.CLIENT_CONFIG] = self.client_config
            message = Message(content=content, message_type=MessageType.TRAIN, dst_node_id=node)
            self._sent[node] = message
            messages.append(message)
        return messages

    def pushed(self, ids: dict[int, str]) -> None:
        """The ids this attempt's messages were pushed under, by node (the transport returns them); a
        reply counts only if it answers its node's message."""
        self._sent_ids = {node: message_id for node, message_id in ids.items() if node in self._sent and message_id}

    def acknowledge(self, replies: Iterable[Message]) -> None:
        """Every reply (in time or not, valid or not, but not an error) to this attempt's message shows
        the node read that message's ``applied-rounds``: they need not be listed again."""
        for reply in replies:
            node = reply.metadata.src_node_id
            sent = self._sent.get(node)
            if reply.has_error() or sent is None or reply.metadata.reply_to_message_id != self._sent_ids.get(node):
                continue
            told = set(sent.content.config_records[self.configrecord_key][keys.APPLIED_ROUNDS])
            left = [r for r in self.applied_since_last_message.pop(node, []) if r not in told]
            if left:
                self.applied_since_last_message[node] = left

    def _validate(self, reply: Message, seen: set[int]) -> ClientUpdate:
        """Decode one reply or raise ``CodecError``; nothing here touches the model."""
        node = reply.metadata.src_node_id
        if node not in self._sent:
            raise CodecError("unexpected-sender", f"node {node} was not selected this round")
        check_reply_to(reply, self._sent_ids.get(node))
        if node in seen:
            raise CodecError("duplicate-reply", f"node {node} replied twice")
        size = reply_content_bytes(reply.content)
        if size > self.max_update_bytes + MAX_REPLY_EXTRA_BYTES:
            raise CodecError("too-large", f"reply holds {size} bytes in all > {self.max_update_bytes + MAX_REPLY_EXTRA_BYTES}")
        metrics = reply.content.metric_records.get(keys.METRICS)
        n = check_metrics(metrics, self.max_num_examples, self.max_samples)
        update = update_record(reply.content, keys.UPDATE)
        if update is None:
            raise CodecError("missing-update", f"reply has no {keys.UPDATE!r} record")
        if update_bytes(update) > self.max_update_bytes:
            raise CodecError("too-large", f"update holds {update_bytes(update)} bytes > {self.max_update_bytes}")
        payloads = decode_update(update, self.shapes)
        check_consistency(metrics, payloads)
        return ClientUpdate(node, n, payloads, metrics, update_norm(payloads))

    def _robust_weights(self, accepted: list[ClientUpdate], stats: AggregationStats) -> tuple[list[float], list[float]]:
        """Each update's share (FedAvg's, capped at ``max_weight_share``) and norm factor (≤ 1)."""
        shares = [u.num_examples / sum(u.num_examples for u in accepted) for u in accepted]
        scales = [1.0] * len(accepted)
        if len(accepted) >= ROBUST_MIN_UPDATES:
            if self.max_weight_share < 1.0:
                shares, capped = capped_shares([u.num_examples for u in accepted], self.max_weight_share)
                stats.capped_nodes = sorted(accepted[i].node for i in capped)
            if self.norm_bound_factor is not None:
                scales, _ = norm_bounds([u.norm for u in accepted], self.norm_bound_factor)
        if self.clip_update_norm is not None:
            scales = [min(s, self.clip_update_norm / u.norm) if u.norm > 0 else s for s, u in zip(scales, accepted)]
        stats.clipped_nodes = sorted(u.node for s, u in zip(scales, accepted) if s < 1.0)
        return shares, scales

    def _aggregate(self, accepted: list[ClientUpdate], stats: AggregationStats) -> dict[str, torch.Tensor]:
        """The weighted delta. An update that cannot be aggregated (it passed validation, so this is a
        defect, not a malformed reply) is rejected as ``internal-error:<type>`` and the rest re-aggregated."""
        while True:
            shares, scales = self._robust_weights(accepted, stats)
            try:
                rule = self.aggregator
                if not rule.weighted:
                    if len(accepted) >= ROBUST_MIN_UPDATES:
                        stats.capped_nodes = []  # unweighted: no share to cap
                        shares = [1.0 / len(accepted)] * len(accepted)
                    else:
                        rule = Mean()
                views = [AcceptedUpdate(u.node, u.payloads, w, s) for w, s, u in zip(shares, scales, accepted)]
                result = rule.aggregate(views, self.shapes, self.device)
            except Exception as err:  # find the update(s) at fault: each alone
                faults = {id(u): _fails_alone(u, self.shapes) for u in accepted}
                if not any(faults.values()):  # none fails alone: the round's aggregate is at fault
                    faults = {id(u): type(err).__name__ for u in accepted}
                for u in accepted:
                    if faults[id(u)]:
                        stats.rejected[f"internal-error:{faults[id(u)]}"] += 1
                accepted[:] = [u for u in accepted if not faults[id(u)]]
                if not accepted:
                    raise
                continue
            return _checked_aggregate(rule, result, self.shapes)

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        # Under Flower's own Strategy.start the grid that pushed the messages wrote their ids into them.
        self.pushed({node: message.metadata.message_id for node, message in self._sent.items()})
        report = self.aggregate(server_round, replies)
        if report.weights is None:
            return None, None
        record = ArrayRecord({k: v.contiguous() for k, v in report.weights.items()})
        return record, MetricRecord({"train-loss": report.stats.train_loss or 0.0,
                                     "applied": len(report.stats.applied_nodes)})

    def aggregate(self, server_round: int, replies: Iterable[Message]) -> AggregationReport:
        """Validate, aggregate and apply the replies of one attempt; ``Diverged`` if the model would
        become non-finite. Too few valid updates: nothing applied (the loop decides about a retry)."""
        stats = AggregationStats()
        accepted: list[ClientUpdate] = []
        seen: set[int] = set()
        for reply in replies:
            if reply.has_error():
                continue
            stats.received += 1
            try:
                update = self._validate(reply, seen)
            except Exception as err:  # noqa: BLE001 — the reply boundary is total: any reply is only rejected
                reason = err.reason if isinstance(err, CodecError) else f"internal-error:{type(err).__name__}"
                stats.rejected[reason] += 1
                stats.rejected_nodes.setdefault(int(reply.metadata.src_node_id), reason)
                continue
            seen.add(update.node)
            accepted.append(update)
        if len(accepted) >= self.policy.min_clients:
            try:
                delta = self._aggregate(accepted, stats)
            except PluginError:
                raise  # the rule itself returns no aggregate: every round would fail so
            except Exception:  # noqa: BLE001 — every update failed alone: the round has none
                delta = None
        if len(accepted) < self.policy.min_clients or delta is None:
            stats.skipped = True
            return AggregationReport(stats)
        new_weights = {name: w.cpu() for name, w in self.optimizer.step(self._weights, delta).items()}
        bad = [name for name, w in new_weights.items() if not torch.isfinite(w).all()]
        if bad:
            raise Diverged(f"round {server_round}: the global model became non-finite in {bad[0]}")
        for u in accepted:
            self.applied_since_last_message[u.node].append(server_round)
        stats.applied_nodes = [u.node for u in accepted]
        losses = [(u.num_examples, float(u.metrics[keys.TRAIN_LOSS])) for u in accepted if keys.TRAIN_LOSS in u.metrics]
        examples = sum(n for n, _ in losses)
        stats.train_loss = sum(n * loss for n, loss in losses) / examples if examples else None
        stats.norms = {u.node: norms for u in accepted if (norms := reported_norms(u.metrics)) is not None}
        sent, numel = (sum(c) for c in zip(*(elements(u.payloads) for u in accepted)))
        stats.achieved_density = sent / numel if numel else None
        return AggregationReport(stats, new_weights)


def _checked_aggregate(rule: Aggregator, result: object, shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """``result`` of ``rule.aggregate``, once it is an aggregate: a dict holding, for exactly the model's
    parameters, a floating-point tensor of the parameter's shape. Otherwise the rule itself is wrong
    (every round would be): a one-line ``PluginError`` naming it, not a failure deep in the server."""
    where = f"aggregator {getattr(rule, 'name', type(rule).__name__)!r:.80}: aggregate() returned"
    if not isinstance(result, dict):
        raise PluginError(f"{where} a {type(result).__name__:.40}, not a dict of tensors by parameter name")
    missing, extra = sorted(set(shapes) - set(result)), sorted(set(result) - set(shapes), key=str)
    if missing or extra:
        name, what = (missing[0], "no tensor for") if missing else (extra[0], "a tensor for no parameter")
        raise PluginError(f"{where} {what} {str(name)!r:.80} ({len(missing)} missing, {len(extra)} unknown)")
    for name, shape in shapes.items():
        tensor = result[name]
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            kind = f"a {tensor.dtype} tensor" if isinstance(tensor, torch.Tensor) else f"a {type(tensor).__name__:.40}"
            raise PluginError(f"{where} {kind} for {name!r:.80}, not a floating-point tensor")
        if tuple(tensor.shape) != tuple(shape):
            raise PluginError(f"{where} shape {tuple(tensor.shape)} for {name!r:.80}, whose shape is {tuple(shape)}")
    return result


def _fails_alone(update: ClientUpdate, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """The exception type's name if aggregating ``update`` alone raises, else None."""
    try:
        aggregate_payloads([(1.0, update.payloads)], shapes)
    except Exception as err:  # noqa: BLE001
        return type(err).__name__
    return None
