"""Partitions of a train split into client datasets, deterministic for a seed (see ``base``).

Each partitioner takes its own options as keyword arguments (``dirichlet(..., alpha=, min_partition_size=)``);
``partition_options`` finds them in the function's signature, so the scenario's ``data`` keys of the
same names reach the partitioner that reads them and no other.
"""

from __future__ import annotations

import inspect
from typing import Any, cast

from fedgc.data.partition.base import PartitionError, PartitionFn
from fedgc.data.partition.dirichlet import dirichlet
from fedgc.data.partition.iid import iid
from fedgc.data.partition.natural_groups import natural
from fedgc.data.partition.pathological import pathological
from fedgc.data.partition.shards import shards
from fedgc.data.partition.size_skew import size_skew

# cast: each takes its own keyword options, which a Protocol's **options cannot spell per function
PARTITIONERS: dict[str, PartitionFn] = {
    "iid": cast(PartitionFn, iid),
    "dirichlet": cast(PartitionFn, dirichlet),
    "shards": cast(PartitionFn, shards),
    "pathological": cast(PartitionFn, pathological),
    "natural": cast(PartitionFn, natural),
    "size_skew": cast(PartitionFn, size_skew),
}



def option_names(name: str) -> tuple[str, ...]:
    """The keyword options partitioner ``name`` takes (``groups`` is the data's, not an option)."""
    parameters = inspect.signature(PARTITIONERS[name]).parameters.values()
    return tuple(p.name for p in parameters if p.kind is p.KEYWORD_ONLY and p.name != "groups")


def partition_options(name: str, source: Any) -> dict[str, Any]:
    """Partitioner ``name``'s options, read by name from ``source`` (a scenario's ``data`` section)."""
    return {option: getattr(source, option) for option in option_names(name)}


__all__ = ["PARTITIONERS", "PartitionError", "PartitionFn", "option_names", "partition_options"]
