"""Aggregation rules: how the server combines one round's accepted updates into the round's update
(the delta the server optimizer applies). No Flower here.

``AGGREGATORS`` maps ``strategy.aggregation`` to a rule; the built-ins are FedAvg's weighted ``mean``,
and the coordinate-wise ``median`` and ``trimmed_mean`` (robust, unweighted). A researcher's own rule
subclasses ``Aggregator`` and is added with ``fedgc.register_aggregator`` or named by import path
(``strategy.aggregation: my_pkg.rules:Krum``). Every rule gets the updates after validation and the
server's norm bounding (``AcceptedUpdate.scale``); a weighted rule also gets each update's share of
the examples (capped by ``strategy.max_weight_share``), an unweighted one is used from
``ROBUST_MIN_UPDATES`` updates on (below that, the mean)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch
from pydantic import BaseModel

from fedgc.compress.aggregate import aggregate_payloads, coordinate_wise
from fedgc.compress.payloads import Payload, decompress
from fedgc.plugins.options import NoOptions

ROBUST_MIN_UPDATES = 3  # an unweighted (robust) rule needs this many updates; fewer: the weighted mean


class AggregationSettings(Protocol):
    """What a rule reads of the scenario's ``strategy`` section (``StrategyConfig``, whose module imports
    this one: a structural type, not an import, so that no import circle forms)."""

    @property
    def trim_fraction(self) -> float: ...
    @property
    def aggregation_options(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class AcceptedUpdate:
    """One client's update as the rule sees it: its decoded ``payloads`` (by parameter name), its
    ``share`` of the round's examples (the shares sum to 1) and the server's norm-bounding ``scale``
    (≤ 1), which the rule applies."""

    node: int
    payloads: dict[str, Payload]
    share: float
    scale: float

    def dense(self, name: str, device: torch.device | None = None) -> torch.Tensor:
        """Parameter ``name`` of this update as a dense fp32 tensor, flat, scale applied."""
        return decompress(self.payloads[name], device).flatten() * self.scale


class Aggregator(ABC):
    """One aggregation rule. A subclass sets ``name`` and ``weighted`` and implements ``aggregate``; its
    settings are ``strategy.aggregation_options``, validated by ``Options`` (a pydantic model, unknown
    keys refused) and passed to ``__init__`` as keywords by ``from_strategy``."""

    name: ClassVar[str]
    weighted: ClassVar[bool] = True  # False: one client, one value (a claimed example count buys nothing)
    Options: ClassVar[type[BaseModel]] = NoOptions

    @classmethod
    def from_strategy(cls, strategy: AggregationSettings) -> Aggregator:
        return cls(**cls.Options.model_validate(strategy.aggregation_options).model_dump())

    @abstractmethod
    def aggregate(self, updates: list[AcceptedUpdate], shapes: dict[str, tuple[int, ...]],
                  device: torch.device) -> dict[str, torch.Tensor]:
        """The round's update: per parameter of ``shapes``, a dense fp32 tensor of that shape."""


class Mean(Aggregator):
    """FedAvg: Σ shareᵢ·scaleᵢ·updateᵢ, sparse payloads scatter-added (``fedgc.compress.aggregate``)."""

    name = "mean"

    def aggregate(self, updates: list[AcceptedUpdate], shapes: dict[str, tuple[int, ...]],
                  device: torch.device) -> dict[str, torch.Tensor]:
        return aggregate_payloads([(u.share, u.payloads) for u in updates], shapes, [u.scale for u in updates], device)


class Median(Aggregator):
    """The coordinate-wise median of the (norm-bounded) updates."""

    name = "median"
    weighted = False

    def aggregate(self, updates: list[AcceptedUpdate], shapes: dict[str, tuple[int, ...]],
                  device: torch.device) -> dict[str, torch.Tensor]:
        return coordinate_wise([u.payloads for u in updates], shapes, [u.scale for u in updates], "median",
                               device=device)


class TrimmedMean(Aggregator):
    """Per coordinate, the mean after dropping the ⌊trim_fraction·m⌋ largest and smallest values."""

    name = "trimmed_mean"
    weighted = False

    def __init__(self, trim_fraction: float = 0.1) -> None:
        if not 0.0 <= trim_fraction < 0.5 or not math.isfinite(trim_fraction):
            raise ValueError(f"trim_fraction must lie in [0, 0.5), not {trim_fraction}")
        self.trim_fraction = trim_fraction

    @classmethod
    def from_strategy(cls, strategy: AggregationSettings) -> Aggregator:
        return cls(strategy.trim_fraction)

    def aggregate(self, updates: list[AcceptedUpdate], shapes: dict[str, tuple[int, ...]],
                  device: torch.device) -> dict[str, torch.Tensor]:
        return coordinate_wise([u.payloads for u in updates], shapes, [u.scale for u in updates], "trimmed_mean",
                               self.trim_fraction, device)


AGGREGATORS: dict[str, type[Aggregator]] = {cls.name: cls for cls in (Mean, Median, TrimmedMean)}


def check_aggregator(cls: type) -> None:
    """TypeError unless ``cls`` is an ``Aggregator`` subclass with a name that implements ``aggregate``."""
    if not (isinstance(cls, type) and issubclass(cls, Aggregator)):
        raise TypeError(f"{cls!r} is not an Aggregator subclass")
    if getattr(cls, "__abstractmethods__", None):
        raise TypeError(f"{cls.__name__} does not implement {', '.join(sorted(cls.__abstractmethods__))}")
