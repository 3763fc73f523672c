"""Which update-blob versions a node speaks (docs/wire-format.md, docs/client-protocol.md), so that no
node is ever sent, or asked for, a blob it cannot read.

A node declares the versions it reads and writes in its answer to the server's census (the
``query.partition`` reply's MetricRecord ``partition``, key ``wire-versions``: a list of ints; fedgc's
Python and JVM clients declare ``[1, 3]``); a node that declares nothing speaks version 1 only (a
client built before version 3, or the JVM client started with ``--node-config "wire-versions=1"``,
which answers as such a client did). A scenario needs version 3 when
``compression.value_dtype`` or a compressed download's ``downlink.value_dtype`` is one of v3's
encodings (int8, int4, sign). The census refuses such a scenario, in one line, when a node does not
declare 3; a node that joins a deployment later without it is left out and counted
(``fedgc.flower.server.partition_grid``).
"""

from __future__ import annotations

from flwr.app import MetricRecord

from fedgc.compress.base import V3_VALUE_DTYPES
from fedgc.flower.keys import WIRE_VERSIONS

# What fedgc's Python ClientApp reads and writes (fedgc.wire.codec: version 1 and v3).
SPOKEN = (1, 3)
MAX_DECLARED = 16  # a longer list is refused before it is read further
MAX_VERSION = 255  # the blob's version byte


def declare(record: MetricRecord) -> MetricRecord:
    """Add this (Python) node's versions to its census answer ``record`` and return it."""
    record[WIRE_VERSIONS] = list(SPOKEN)
    return record


def declared(metrics: MetricRecord | None) -> tuple[int, ...] | None:
    """The versions a census answer declares: (1,) when it has no ``wire-versions``; None when that
    is not a list of at most 16 whole numbers in 1…255 (the answer is then refused)."""
    raw = None if metrics is None else metrics.get(WIRE_VERSIONS)
    if raw is None:
        return (1,)
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_DECLARED:
        return None
    versions = []
    for value in raw:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value \
                or value in (float("inf"), float("-inf")) or int(value) != value or not 1 <= value <= MAX_VERSION:
            return None
        versions.append(int(value))
    return tuple(sorted(set(versions)))


def needed(scenario) -> tuple[int, str | None]:
    """(the blob version ``scenario``'s traffic needs, the setting that needs it or None): 3 when its
    uploads or its compressed downloads encode values in int8, int4 or sign, else 1."""
    if scenario.compression.value_dtype in V3_VALUE_DTYPES:
        return 3, f"compression.value_dtype: {scenario.compression.value_dtype}"
    if scenario.downlink.enabled and scenario.downlink.value_dtype in V3_VALUE_DTYPES:
        return 3, f"downlink.value_dtype: {scenario.downlink.value_dtype}"
    return 1, None
