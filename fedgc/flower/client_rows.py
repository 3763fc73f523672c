"""Per-client detail of one attempt of a round (``clients.jsonl``): which selected node did what.

A round row in ``metrics.jsonl`` counts outcomes; this names them. Each selected node gets one
``ClientRecord``: ``applied``; ``skipped`` (valid, but the attempt had too few updates to apply);
``rejected`` with the strategy's reason; ``failed`` (its ClientApp raised, or no reply came);
``late``, ``cut`` or ``discarded`` with the phase it was in — plus its phase times (simulated or
measured seconds, as the round's) and its bytes each way.
"""

from __future__ import annotations

from fedgc.flower.exchange import Exchanged
from fedgc.flower.strategy import AggregationStats
from fedgc.metrics import ClientRecord
from fedgc.network.timeline import ClientTiming


def _phase(t: ClientTiming) -> str:
    """The phase a client that did not finish was in."""
    return "download" if t.downloaded is None else "compute" if t.computed is None else "upload"


def _span(end: float | None, start: float | None) -> float | None:
    return None if end is None or start is None else end - start


def client_rows(server_round: int, attempt: int, selected: list[int], exchanged: Exchanged | None,
                stats: AggregationStats) -> list[ClientRecord]:
    """One record per ``selected`` node (the nodes the training messages went to, as the strategy
    named them), in node order."""
    if exchanged is None:
        return []
    traffic = exchanged.traffic
    timings = {t.node_id: t for t in traffic.timeline.timings}
    failures = {f.node_id: f for f in traffic.failures}
    applied, clipped, capped = set(stats.applied_nodes), set(stats.clipped_nodes), set(stats.capped_nodes)
    rows = []
    for node in sorted(selected):
        row = ClientRecord(round=server_round, attempt=attempt, node=node, outcome="failed",
                           bytes_down=traffic.download_bytes.get(node), bytes_up=traffic.upload_bytes.get(node),
                           clipped=node in clipped, capped=node in capped)
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
