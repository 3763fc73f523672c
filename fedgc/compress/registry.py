"""Scenario name → compressor class: the explicit list of every built-in compressor (no registration
by import side effect; adding a built-in compressor is its file and one line here). ``add_compressor``
adds another class to ``COMPRESSORS`` at run time (a user's compressor), after checking its interface."""

from __future__ import annotations

from fedgc.compress.base import Compressor, CompressorOptions
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
BUILT_IN: frozenset[str] = frozenset(COMPRESSORS)  # fedgc's own; any other name in COMPRESSORS is a user's

# The keys of the ``compression`` section that the server reads (fedgc.compress.config.CompressionConfig's
# fields): no compressor option may take one of these names.
SERVER_KEYS: frozenset[str] = frozenset({"name", "density", "warmup_rounds", "warmup_for"})


def check_compressor(cls: type[Compressor]) -> None:
    """TypeError unless ``cls`` is a usable compressor class: a ``Compressor`` subclass with a ``name``
    and an ``Options`` model derived from ``CompressorOptions`` whose fields avoid the server's keys."""
    if not (isinstance(cls, type) and issubclass(cls, Compressor)):
        raise TypeError(f"{cls!r} is not a Compressor subclass")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"{cls.__name__}.name must be an identifier (the scenario's compression.name), not {name!r}")
    if not (isinstance(cls.Options, type) and issubclass(cls.Options, CompressorOptions)):
        raise TypeError(f"{cls.__name__}.Options must subclass fedgc.compress.base.CompressorOptions")
    shadowed = sorted(SERVER_KEYS & set(cls.Options.model_fields))
    if shadowed:
        raise TypeError(f"{cls.__name__}.Options.{shadowed[0]} shadows a key of the compression section")


def add_compressor(cls: type[Compressor]) -> None:
    """Make ``cls`` available as ``compression.name: <cls.name>`` (and its options as section keys)."""
    check_compressor(cls)
    if COMPRESSORS.get(cls.name, cls) is not cls:
        raise ValueError(f"a compressor named {cls.name!r} exists already ({COMPRESSORS[cls.name].__qualname__})")
    COMPRESSORS[cls.name] = cls


for _cls in COMPRESSORS.values():
    check_compressor(_cls)

def uses_density(name: str) -> bool:
    """Whether compressor ``name`` keeps ``compression.density`` of the entries (``reads_density``): only
    these record a ``density`` per round, and only these can be warmed up (``compression.warmup_for``).
    tests/test_density_and_warmup.py checks this against what every registered compressor does."""
    return name in COMPRESSORS and COMPRESSORS[name].reads_density


# The built-in ones (k = ceil(density · n) entries per tensor).
DENSITY_COMPRESSORS: frozenset[str] = frozenset(n for n in COMPRESSORS if uses_density(n))


def compressor_names() -> list[str]:
    return sorted(COMPRESSORS)


def make_compressor(name: str, options: CompressorOptions | None = None) -> Compressor:
    """Compressor ``name`` built from ``options`` (an instance of its ``Options``; default: its defaults)."""
    if name not in COMPRESSORS:
        raise KeyError(f"unknown compressor {name!r}; known: {', '.join(compressor_names())}")
    cls = COMPRESSORS[name]
    return cls.from_config(options if options is not None else cls.Options())
