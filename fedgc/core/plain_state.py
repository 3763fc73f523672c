"""Run state as plain data, so a checkpoint loads with ``torch.load(weights_only=True)``.

``to_plain`` turns a state (tensors, numpy arrays and scalars, numpy random generators, sets,
Counters, and instances of fedgc's own network classes; objects and generators referenced from several
places, or in a cycle, stay one object) into
tensors, str, bytes, int, float, bool, None, lists, tuples and dicts, which is all that
``weights_only=True`` accepts. ``from_plain`` rebuilds it. It never runs code named by the file: an
object is only rebuilt if its class lives in an allowed fedgc module (``ALLOWED_MODULES``), by
``object.__new__`` and filling ``__dict__`` (no ``__init__``, ``__setstate__`` or ``__reduce__``), and
a generator only from numpy's own bit generators. Anything else is a ``PlainStateError``.
"""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any, TypeGuard

import numpy as np
import torch

TAG = "__fedgc__"
ALLOWED_MODULES = ("fedgc.network.",)  # prefixes of the modules whose classes a checkpoint may hold
BIT_GENERATORS = {"PCG64": np.random.PCG64, "PCG64DXSM": np.random.PCG64DXSM, "MT19937": np.random.MT19937,
                  "Philox": np.random.Philox, "SFC64": np.random.SFC64}


class PlainStateError(ValueError):
    """State that cannot be written or read as plain data; ``str(err)`` is one line."""


def _allowed(cls: object) -> TypeGuard[type]:
    return isinstance(cls, type) and cls.__module__.startswith(ALLOWED_MODULES)


def to_plain(value: object, _memo: dict[int, tuple[int, object]] | None = None) -> Any:
    memo = {} if _memo is None else _memo
    if value is None or isinstance(value, (bool, str, bytes)):
        return value
    if isinstance(value, np.generic):  # numpy scalars would pickle as numpy objects
        return value.item()
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise PlainStateError("a numpy array of Python objects cannot be checkpointed")
        return {TAG: "ndarray", "v": torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, np.random.Generator):  # shared like objects: one generator stays one
        if id(value) in memo:
            return {TAG: "ref", "id": memo[id(value)][0]}
        memo[id(value)] = (len(memo), value)
        return {TAG: "generator", "id": memo[id(value)][0], "state": to_plain(value.bit_generator.state, memo)}
    if isinstance(value, Counter):
        return {TAG: "counter", "items": [(to_plain(k, memo), to_plain(v, memo)) for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {TAG: "set", "items": [to_plain(v, memo) for v in value]}
    if isinstance(value, tuple):
        return tuple(to_plain(v, memo) for v in value)
    if isinstance(value, list):
        return [to_plain(v, memo) for v in value]
    if isinstance(value, dict):
        if TAG in value or type(value) is not dict:
            return {TAG: "dict", "items": [(to_plain(k, memo), to_plain(v, memo)) for k, v in value.items()]}
        return {to_plain(k, memo): to_plain(v, memo) for k, v in value.items()}
    cls = type(value)
    if _allowed(cls) and hasattr(value, "__dict__"):
        key = id(value)
        if key in memo:
            return {TAG: "ref", "id": memo[key][0]}
        memo[key] = (len(memo), value)  # keeps value alive, so its id is not reused meanwhile
        return {TAG: "object", "id": memo[key][0], "class": f"{cls.__module__}:{cls.__qualname__}",
                "dict": to_plain(vars(value), memo)}
    raise PlainStateError(f"{cls.__module__}.{cls.__qualname__} cannot be checkpointed as plain data")


def _class(name: object) -> type:
    module, _, qualname = str(name).partition(":")
    if not module.startswith(ALLOWED_MODULES) or not qualname:
        raise PlainStateError(f"the checkpoint names class {name!r}, which is not allowed")
    try:
        obj: object = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise PlainStateError(f"the checkpoint names class {name!r}, which does not exist") from None
    if not _allowed(obj):
        raise PlainStateError(f"the checkpoint names {name!r}, which is not an allowed class")
    return obj


def _generator(state: object) -> np.random.Generator:
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if not isinstance(state, dict) or name not in BIT_GENERATORS:
        raise PlainStateError(f"the checkpoint holds an unknown random generator {name!r}")
    bit_generator = BIT_GENERATORS[name]()
    try:
        bit_generator.state = state
    except (TypeError, ValueError, KeyError):
        raise PlainStateError(f"the checkpoint holds a malformed {name} generator state") from None
    return np.random.Generator(bit_generator)


def from_plain(value: object, _memo: dict[object, object] | None = None) -> Any:
    memo = {} if _memo is None else _memo
    if isinstance(value, list):
        return [from_plain(v, memo) for v in value]
    if isinstance(value, tuple):
        return tuple(from_plain(v, memo) for v in value)
    if not isinstance(value, dict):
        return value
    kind = value.get(TAG)
    if kind is None:
        return {from_plain(k, memo): from_plain(v, memo) for k, v in value.items()}
    try:
        if kind == "ndarray":
            return value["v"].numpy().copy()
        if kind == "generator":
            memo[value["id"]] = _generator(from_plain(value["state"], memo))
            return memo[value["id"]]
        if kind in ("counter", "set", "dict"):
            items = [from_plain(i, memo) for i in value["items"]]
            return Counter(dict(items)) if kind == "counter" else set(items) if kind == "set" else dict(items)
        if kind == "ref":
            return memo[value["id"]]
        if kind == "object":
            cls = _class(value["class"])
            obj: object = object.__new__(cls)
            memo[value["id"]] = obj
            fields = from_plain(value["dict"], memo)
            if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
                raise PlainStateError(f"the checkpoint holds malformed fields for {value['class']}")
            obj.__dict__.update(fields)
            return obj
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        if isinstance(err, PlainStateError):
            raise
        raise PlainStateError(f"the checkpoint holds a malformed {kind!r} entry") from None
    raise PlainStateError(f"the checkpoint holds an unknown entry kind {kind!r}")
