"""The Flower internals fedgc writes or reads, in one place, checked against the flwr it runs with.

Flower's ``Metadata`` has no setter for a message's id or its sender, and an ``ArrayRecord`` keeps its
object id private; fedgc needs three of them (an in-process round trip carries the id over, a grid
relabels a reply's sender by partition, the byte-count cache reuses an unchanged record's id). They
are written here only: ``check()`` (run when this module is imported) tests each on a real object of
the installed flwr, so a Flower upgrade that renames one fails here, in one line, not mid-run.
"""

from __future__ import annotations

from flwr.app import ArrayRecord, Metadata
from flwr.supercore.inflatable.inflatable_object import InflatableObject

TESTED = "1.41–1.42"  # the flwr versions these were read from (pyproject.toml pins flwr>=1.41,<2)


class FlowerInternalsChanged(RuntimeError):
    """The installed flwr no longer has an internal fedgc writes."""


def set_message_id(metadata: Metadata, message_id: str) -> None:
    """A message's id, as Flower's own grid sets it on a message it pulls."""
    metadata.__dict__["_message_id"] = message_id


def set_src_node_id(metadata: Metadata, node_id: int) -> None:
    """A reply's sender (``PartitionGrid``: the node's partition label)."""
    metadata.__dict__["_src_node_id"] = node_id


def cached_object_id(record: InflatableObject) -> str | None:
    """The object id Flower computed for ``record`` (an ``ArrayRecord``, a ``ConfigRecord``...), if it
    computed one (None otherwise)."""
    value = record.__dict__.get("_object_id")
    return value if isinstance(value, str) else None


def check() -> None:
    import flwr

    metadata = Metadata(run_id=1, message_id="", src_node_id=1, dst_node_id=2, reply_to_message_id="",
                        group_id="", created_at=0.0, ttl=1.0, message_type="train")
    set_message_id(metadata, "probe")
    set_src_node_id(metadata, 7)
    record = ArrayRecord()
    record.object_id  # noqa: B018 — computes and caches the id, as serializing a message does
    if metadata.message_id != "probe" or metadata.src_node_id != 7 or cached_object_id(record) != record.object_id:
        raise FlowerInternalsChanged(f"fedgc: flwr {flwr.__version__} changed the Metadata or ArrayRecord "
                                     f"internals fedgc uses (fedgc.flower.internals, tested with flwr {TESTED})")


check()
