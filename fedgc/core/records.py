"""What one attempt of a round did, as records (no Flower here): the round's traffic and aggregation
outcome in, one ``metrics.jsonl`` row (``round_record``) and one ``clients.jsonl`` row per selected
node (``client_rows``) out, and the stop rule for a run that no longer applies anything
(``idle_reason``). Every engine's loop fills them the same way."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from fedgc.network.timeline import ClientTiming, RoundTimeline
from fedgc.runs.metrics import ClientRecord, RoundRecord


@dataclass(frozen=True)
class ClientFailure:
    """A selected client whose ClientApp replied with an error instead of an update."""

    node_id: int
    error_type: str
    message: str  # one line


@dataclass
class TrainRoundTraffic:
    """What the network did with one round of training messages."""

    timeline: RoundTimeline
    selected: int = 0
    failed: int = 0
    failures: list[ClientFailure] = field(default_factory=list)
    bytes_down: int = 0
    bytes_up: int = 0
    upload_bytes: dict[int, int] = field(default_factory=dict)
    download_bytes: dict[int, int] = field(default_factory=dict)  # node -> wire size of its train message


@dataclass
class AggregationStats:
    """What the aggregation did with one attempt's replies."""

    received: int = 0
    applied_nodes: list[int] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    rejected_nodes: dict[int, str] = field(default_factory=dict)  # node -> reason (a node's first rejected reply)
    train_loss: float | None = None
    achieved_density: float | None = None
    clipped_nodes: list[int] = field(default_factory=list)  # norm bounded (adaptive or absolute)
    capped_nodes: list[int] = field(default_factory=list)  # weight share capped
    skipped: bool = False  # too few valid updates: nothing applied
    norms: dict[int, tuple[float, float]] = field(default_factory=dict)  # node -> reported (before, after) clipping


class Idle(RuntimeError):
    """No update was applied for ``strategy.max_idle_rounds`` consecutive attempts: the run stops."""


def idle_reason(rows: list[RoundRecord], limit: int) -> str | None:
    """Why the run should stop, when the last ``limit`` attempts applied nothing (else None)."""
    tail = rows[-limit:] if limit else []
    if len(tail) < limit or not tail or any(r.applied for r in tail):
        return None
    total = {k: sum(getattr(r, k) for r in tail) for k in ("selected", "failed", "cut", "late", "discarded",
                                                           "rejected")}
    what = ("no client was online" if not total["selected"] else
            ", ".join(f"{v} {k}" for k, v in total.items() if v or k == "selected"))
    return (f"no update applied in {limit} consecutive attempts (rounds {tail[0].round}-{tail[-1].round}: "
            f"{what}); see strategy.max_idle_rounds")


def _reached(time: float | None) -> float:
    """A completed client's time of a phase: a completed client reached every phase."""
    if time is None:
        raise ValueError("a completed client is missing the time of a phase")
    return time


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def round_record(server_round: int, attempt: int, stats: AggregationStats, traffic: TrainRoundTraffic | None,
                 previous_end: float, dense_bytes: int) -> RoundRecord:
    """One row of metrics.jsonl for one attempt (``traffic`` None: nobody was selected). The loop
    fills in the downlink's figures and the evaluation."""
    record = RoundRecord(round=server_round, skipped=stats.skipped, attempt=attempt)
    if traffic is None:  # nobody was selected: no time passed in this round
        record.sim_start_s = record.sim_end_s = previous_end
    else:
        timeline = traffic.timeline
        record.sim_start_s, record.sim_end_s = timeline.start, timeline.end
        record.round_duration_s = timeline.end - timeline.start
        record.selected, record.failed = traffic.selected, traffic.failed
        record.completed, record.cut, record.late, record.discarded = (
            timeline.count(k) for k in ("completed", "cut", "late", "discarded"))
        record.bytes_down, record.bytes_up = traffic.bytes_down, traffic.bytes_up
        record.dense_bytes_up = dense_bytes * record.completed
        done = [t for t in timeline.timings if t.status == "completed"]
        record.mean_download_s = _mean([_reached(t.downloaded) - t.start for t in done])
        record.mean_compute_s = _mean([_reached(t.computed) - _reached(t.downloaded) for t in done])
        uploads = [_reached(t.uploaded) - _reached(t.computed) for t in done]
        record.mean_upload_s, record.max_upload_s = _mean(uploads), (max(uploads) if uploads else None)
        record.client_upload_bytes = [traffic.upload_bytes[t.node_id] for t in done]
        record.client_upload_s = uploads
    record.rejected = sum(stats.rejected.values())
    record.rejected_reasons = dict(sorted(stats.rejected.items()))
    record.applied = len(stats.applied_nodes)
    record.applied_nodes = sorted(stats.applied_nodes)
    record.clipped_nodes, record.capped_nodes = list(stats.clipped_nodes), list(stats.capped_nodes)
    record.train_loss, record.achieved_density = stats.train_loss, stats.achieved_density
    if stats.norms:  # the applied updates whose clients reported their norms (client.report_norms)
        before, after = zip(*stats.norms.values())
        record.norm_before_clip_median, record.norm_before_clip_max = float(np.median(before)), max(before)
        record.norm_after_clip_median = float(np.median(after))
        record.locally_clipped = sum(a < b * (1 - 1e-6) for b, a in stats.norms.values())
    return record


def _phase(t: ClientTiming) -> str:
    """The phase a client that did not finish was in."""
    return "download" if t.downloaded is None else "compute" if t.computed is None else "upload"


def _span(end: float | None, start: float | None) -> float | None:
    return None if end is None or start is None else end - start


def client_rows(server_round: int, attempt: int, selected: list[int], traffic: TrainRoundTraffic | None,
                stats: AggregationStats) -> list[ClientRecord]:
    """One record per ``selected`` node (the nodes the training messages went to, as the strategy
    named them), in node order: ``applied``; ``skipped`` (valid, but the attempt had too few updates
    to apply); ``rejected`` with the strategy's reason; ``failed`` (its ClientApp raised, or no reply
    came); ``late``, ``cut`` or ``discarded`` with the phase it was in — plus its phase times and bytes."""
    if traffic is None:
        return []
    timings = {t.node_id: t for t in traffic.timeline.timings}
    failures = {f.node_id: f for f in traffic.failures}
    applied, clipped, capped = set(stats.applied_nodes), set(stats.clipped_nodes), set(stats.capped_nodes)
    rows = []
    for node in sorted(selected):
        row = ClientRecord(round=server_round, attempt=attempt, node=node, outcome="failed",
                           bytes_down=traffic.download_bytes.get(node), bytes_up=traffic.upload_bytes.get(node),
                           clipped=node in clipped, capped=node in capped)
        row.norm_before_clip, row.norm_after_clip = stats.norms.get(node, (None, None))
        timing = timings.get(node)
        if timing is not None:
            row.download_s = _span(timing.downloaded, timing.start)
            row.compute_s = _span(timing.computed, timing.downloaded)
            row.upload_s = _span(timing.uploaded, timing.computed)
        if node in failures:
            failure = failures[node]
            row.reason = f"{failure.error_type}: {failure.message}"
        elif timing is None:
            row.reason = "no reply"
        elif timing.status != "completed":
            row.outcome, row.phase = timing.status, _phase(timing)
        elif node in stats.rejected_nodes:
            row.outcome, row.reason = "rejected", stats.rejected_nodes[node]
        else:
            row.outcome = "applied" if node in applied else "skipped"
        rows.append(row)
    return rows
