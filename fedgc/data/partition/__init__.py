"""Partitions of a train split into client datasets, deterministic for a seed (see ``base``)."""

from __future__ import annotations

from fedgc.data.partition.base import PartitionError, PartitionFn
from fedgc.data.partition.dirichlet import dirichlet
from fedgc.data.partition.iid import iid
from fedgc.data.partition.natural import natural
from fedgc.data.partition.pathological import pathological
from fedgc.data.partition.shards import shards
from fedgc.data.partition.size_skew import size_skew

PARTITIONERS: dict[str, PartitionFn] = {
    "iid": iid,
    "dirichlet": dirichlet,
    "shards": shards,
    "pathological": pathological,
    "natural": natural,
    "size_skew": size_skew,
}

__all__ = ["PARTITIONERS", "PartitionError", "PartitionFn"]
