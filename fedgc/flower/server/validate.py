"""What the server checks in a client's training reply besides the update blob (``codec`` checks that):
the reply answers this round's message, and its metrics are in range and consistent with the update.

Every violation raises ``CodecError(reason)``: the strategy rejects the reply and counts the reason.
"""

from __future__ import annotations

import math

import torch
from flwr.app import Message, MetricRecord

from fedgc.compress.payloads import DensePayload, Payload, SparsePayload, decompress
from fedgc.compress.update import payload_elements
from fedgc.flower import keys
from fedgc.wire.codec import CodecError

MAX_REPLY_EXTRA_BYTES = 1_000_000  # a reply's records besides the update: a few metrics


def reply_content_bytes(content) -> int:
    """What a reply carries in all its records (arrays by their bytes, metrics and configs by their
    values: 8 bytes a number, strings and bytes by their length), the update included."""
    total = sum(record.count_bytes() for record in content.array_records.values())
    for records in (content.metric_records, content.config_records):
        for record in records.values():
            for value in record.values():
                items = value if isinstance(value, list) else [value]
                total += sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in items) + 8
    return total


def check_reply_to(reply: Message, expected: str | None) -> None:
    """``reply`` must answer the message this round sent to its node, pushed under ``expected`` (None:
    none was pushed). A reply to an earlier round's message (a replay, or one that arrived after its
    round closed) names another id."""
    got = reply.metadata.reply_to_message_id
    if not expected or got != expected:
        raise CodecError("stale-reply", f"reply to message {got!r}, this round sent {expected or ''!r}")


def _integer(metrics: MetricRecord, key: str, reason: str = "bad-metrics") -> int | None:
    """The metric as an int (an integral float is accepted), None when absent."""
    value = metrics.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CodecError(reason, f"{key} is not a number")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise CodecError(reason, f"{key}={value} is not an integer")
    return int(value)


def check_metrics(metrics: MetricRecord | None, max_num_examples: int, max_samples: int | None = None) -> int:
    """Range checks; returns ``num-examples``, a positive integer (it weighs the update). ``max_samples``:
    the most samples the train message asked for (a claim of more is rejected; the simulated clock
    charged at most that many)."""
    if metrics is None:
        raise CodecError("missing-metrics", "reply has no 'metrics' record")
    n = _integer(metrics, keys.NUM_EXAMPLES, "bad-num-examples")
    if n is None or not 1 <= n <= max_num_examples:
        raise CodecError("bad-num-examples", f"num-examples={n} outside 1…{max_num_examples}")
    loss = metrics.get(keys.TRAIN_LOSS)
    if loss is not None and (isinstance(loss, bool) or not isinstance(loss, (int, float))
                             or not math.isfinite(loss) or loss < 0):
        raise CodecError("bad-metrics", f"train-loss={loss!r} is not a finite number ≥ 0")
    steps, samples = _integer(metrics, keys.STEPS), _integer(metrics, keys.SAMPLES)
    if steps is not None and steps < 1:
        raise CodecError("bad-metrics", f"steps={steps} < 1")
    if samples is not None:
        # Each local step draws a batch of 1…num-examples of the client's own examples.
        low, high = (steps, steps * n) if steps is not None else (1, None)
        if samples < low or (high is not None and samples > high):
            raise CodecError("bad-metrics", f"samples={samples} outside {low}…{high} for {steps} steps")
        if max_samples is not None and samples > max_samples:
            raise CodecError("bad-metrics", f"samples={samples}, more than the {max_samples} the server asked for")
    reported_norms(metrics)
    return n


def reported_norms(metrics: MetricRecord) -> tuple[float, float] | None:
    """The update's L2 norm before and after local clipping, as the client reported them (both or
    neither; finite, ≥ 0, clipping never grows a norm), None when not reported."""
    before, after = metrics.get(keys.NORM_BEFORE_CLIP), metrics.get(keys.NORM_AFTER_CLIP)
    if before is None and after is None:
        return None
    for key, value in ((keys.NORM_BEFORE_CLIP, before), (keys.NORM_AFTER_CLIP, after)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise CodecError("bad-metrics", f"{key}={value!r:.40} is not a finite number ≥ 0")
    if after > before * (1 + 1e-5) + 1e-6:
        raise CodecError("bad-metrics", f"{keys.NORM_AFTER_CLIP}={after} is more than {keys.NORM_BEFORE_CLIP}={before}")
    return float(before), float(after)


def elements(payloads: dict[str, Payload]) -> tuple[int, int]:
    """(entries sent, entries in the model), counted from the decoded update."""
    return (sum(payload_elements(p) for p in payloads.values()),
            sum(math.prod(p.shape) for p in payloads.values()))


def check_consistency(metrics: MetricRecord, payloads: dict[str, Payload]) -> None:
    """``elements-sent`` and ``elements-total``, when reported, must be what the update holds."""
    sent, total = elements(payloads)
    for key, actual in ((keys.ELEMENTS_SENT, sent), (keys.ELEMENTS_TOTAL, total)):
        claimed = _integer(metrics, key)
        if claimed is not None and claimed != actual:
            raise CodecError("bad-metrics", f"{key}={claimed}, but the update holds {actual}")


def update_norm(payloads: dict[str, Payload]) -> float:
    """The L2 norm of the whole decoded update, in float64 (finite for any finite f32 values)."""
    total = 0.0
    for payload in payloads.values():
        values = payload.values if isinstance(payload, (DensePayload, SparsePayload)) else decompress(payload)
        total += float(values.to(torch.float64).square().sum())
    return math.sqrt(total)
