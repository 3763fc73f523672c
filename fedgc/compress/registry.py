"""Scenario name → compressor class. Each compressor module registers itself on import."""

from __future__ import annotations

from collections.abc import Callable

from fedgc.compress.base import Compressor

COMPRESSORS: dict[str, type[Compressor]] = {}


def register(cls: type[Compressor]) -> type[Compressor]:
    COMPRESSORS[cls.name] = cls
    return cls


def compressor_names() -> list[str]:
    return sorted(COMPRESSORS)


def make_compressor(name: str, factory: Callable[[type[Compressor]], Compressor] | None = None) -> Compressor:
    if name not in COMPRESSORS:
        raise KeyError(f"unknown compressor {name!r}; known: {', '.join(compressor_names())}")
    cls = COMPRESSORS[name]
    return factory(cls) if factory else cls()
