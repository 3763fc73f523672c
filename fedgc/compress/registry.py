"""Scenario name → compressor class: the explicit list of every compressor (no registration by import
side effect; adding a compressor is its file and one line here)."""

from __future__ import annotations

from collections.abc import Callable

from fedgc.compress.base import Compressor
from fedgc.compress.dgc import DGC
from fedgc.compress.efsignsgd import EFSignSGD
from fedgc.compress.fp16 import Fp16
from fedgc.compress.natural import Natural
from fedgc.compress.none import NoCompression
from fedgc.compress.onebit import OneBit
from fedgc.compress.powersgd import PowerSGD
from fedgc.compress.qsgd import QSGD
from fedgc.compress.randomk import RandomK
from fedgc.compress.signsgd import SignSGD
from fedgc.compress.signum import Signum
from fedgc.compress.stc import STC
from fedgc.compress.terngrad import TernGrad
from fedgc.compress.threshold import Threshold
from fedgc.compress.topk import TopK

COMPRESSORS: dict[str, type[Compressor]] = {cls.name: cls for cls in (
    NoCompression, Fp16, TopK, RandomK, Threshold, DGC, SignSGD, EFSignSGD,
    Signum, OneBit, QSGD, TernGrad, Natural, PowerSGD, STC,
)}

# The compressors that read ``compression.density`` (k = ceil(density · n) entries per tensor): only
# these record a ``density`` per round, and only these can be warmed up (``compression.warmup_for``).
# tests/test_compressors_density.py checks this set against what every registered compressor does.
DENSITY_COMPRESSORS: frozenset[str] = frozenset({"dgc", "topk", "randomk", "stc"})


def uses_density(name: str) -> bool:
    return name in DENSITY_COMPRESSORS


def compressor_names() -> list[str]:
    return sorted(COMPRESSORS)


def make_compressor(name: str, factory: Callable[[type[Compressor]], Compressor] | None = None) -> Compressor:
    if name not in COMPRESSORS:
        raise KeyError(f"unknown compressor {name!r}; known: {', '.join(compressor_names())}")
    cls = COMPRESSORS[name]
    return factory(cls) if factory else cls()
