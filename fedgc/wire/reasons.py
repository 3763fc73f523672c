"""Every rejection reason the server can count for a client's training reply, in check order.

docs/wire-format.md has one table per group with the exact condition of each reason;
tests/test_vectors.py checks that this list, the reasons raised in fedgc/ and in the JVM client,
and the document's tables name the same reasons. A reply's reason is the first check that fails,
in this order (``REPLY`` before ``ENVELOPE`` before ``BLOB`` before ``AFTER_DECODE``).
"""

from __future__ import annotations

# fedgc/flower/server/strategy.py and fedgc/flower/server/validate.py, before the update record is opened.
REPLY = ("unexpected-sender", "stale-reply", "duplicate-reply", "missing-metrics", "bad-num-examples",
         "bad-metrics", "missing-update", "too-large")
# fedgc/flower/update_record.py: the ArrayRecord that carries the blob.
ENVELOPE = ("bad-record", "bad-dtype", "bad-array")
# fedgc/wire/codec.py: the blob itself.
BLOB = ("bad-version", "truncated", "bad-kind", "bad-dtype", "bad-varint", "bad-indices", "bad-bits",
        "bad-levels", "bad-rank", "non-finite", "negative-scale", "trailing-bytes")
# After the blob decoded: elements-sent/total against the update (bad-metrics again), then a defect
# while decoding, validating or aggregating (any exception other than CodecError), named by its type.
AFTER_DECODE = ("bad-metrics", "internal-error:<Type>")

REASONS = tuple(dict.fromkeys(REPLY + ENVELOPE + BLOB + AFTER_DECODE))
