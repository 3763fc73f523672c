"""A sweep's plan: the swept axes (``--sweep KEY=A,B``), their points (the cartesian product, each
with its run folder's name), every point's validated scenario, and the plan a sweep folder keeps
(``sweep.yaml``, with a digest so that a plan edited by hand is refused). Running it:
``fedgc.sweeps.runner``."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information (types-PyYAML not installed)

from fedgc.bounded import SCENARIO_MAX_BYTES, read_text
from fedgc.errors import FedgcError
from fedgc.scenario import yaml12
from fedgc.scenario.errors import ScenarioError
from fedgc.scenario.model import Scenario, parse_override, set_dotted, validate

MAX_SWEEP_POINTS = 1000
MANIFEST = "sweep.yaml"  # in the sweep folder: what --resume needs to finish the sweep


class SweepError(FedgcError, ValueError):
    """An invalid ``--sweep``; ``str(err)`` is one line naming the spec and the problem."""


@dataclass(frozen=True)
class SweepAxis:
    """One swept key and its values, as written on the command line."""

    key: str
    values: tuple[str, ...]

    @classmethod
    def parse(cls, spec: str) -> SweepAxis:
        """``"compression.name=none,topk"`` → ``SweepAxis("compression.name", ("none", "topk"))``."""
        key, sep, raw = spec.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SweepError(f"--sweep {spec!r}: expected KEY=VALUE1,VALUE2,...")
        if not all(key.split(".")):
            raise SweepError(f"--sweep {spec!r}: empty key component")
        if raw.count(",") >= MAX_SWEEP_POINTS:
            raise SweepError(f"--sweep {key}: more than {MAX_SWEEP_POINTS} values")
        values = tuple(v.strip() for v in raw.split(","))
        if not raw.strip() or not all(values):
            raise SweepError(f"--sweep {spec!r}: empty value (values are separated by commas)")
        repeated = sorted(v for v, n in Counter(values).items() if n > 1)
        if repeated:
            raise SweepError(f"--sweep {spec!r}: value {repeated[0]!r} given twice")
        return cls(key, values)

    @property
    def spec(self) -> str:
        return f"{self.key}=" + ",".join(self.values)

    @classmethod
    def of(cls, key: str, values: list[Any]) -> SweepAxis:
        """From Python: ``SweepAxis.of("compression.density", [0.1, 0.01])``."""
        return cls.parse(f"{key}=" + ",".join(str(v) for v in values))


@dataclass(frozen=True)
class SweepPoint:
    """One combination of swept values and the folder its run goes to."""

    folder: str
    assignments: tuple[tuple[str, str], ...]  # (key, value text) per swept key

    def apply(self, base_tree: dict[str, Any]) -> dict[str, Any]:
        import copy

        tree = copy.deepcopy(base_tree)
        for key, text in self.assignments:
            set_dotted(tree, *parse_override(f"{key}={text}"))
        return tree


def _folder_part(key: str, value: str) -> str:
    return f"{key}={re.sub(r'[^A-Za-z0-9._+-]', '_', value)}"


def sweep_points(axes: list[SweepAxis]) -> list[SweepPoint]:
    """The cartesian product of the axes, in command-line order (the last axis varies fastest)."""
    keys = [axis.key for axis in axes]
    repeated = sorted(k for k, n in Counter(keys).items() if n > 1)
    if repeated:
        raise SweepError(f"--sweep {repeated[0]}: key swept twice (give all its values in one --sweep)")
    if math.prod(len(axis.values) for axis in axes) > MAX_SWEEP_POINTS:
        raise SweepError(f"--sweep: {math.prod(len(axis.values) for axis in axes)} points, more than the "
                         f"{MAX_SWEEP_POINTS} a sweep may have (split it into several sweeps)")
    points, used = [], set()
    for combo in itertools.product(*(axis.values for axis in axes)):
        assignments = tuple(zip(keys, combo))
        folder = ",".join(_folder_part(k, v) for k, v in assignments)
        if folder in used:  # two values that differ only in characters not allowed in folder names
            raise SweepError(f"--sweep: two points would share the folder {folder!r}")
        used.add(folder)
        points.append(SweepPoint(folder, assignments))
    return points


def plan(base_tree: dict[str, Any], axes: list[SweepAxis]) -> list[tuple[SweepPoint, Scenario]]:
    """Every point's validated scenario, so that a bad value fails before anything runs."""
    planned = []
    for point in sweep_points(axes):
        try:
            planned.append((point, validate(point.apply(base_tree))))
        except ScenarioError as err:
            raise SweepError(f"{point.folder}: {err}") from None
    return planned


def read_manifest(out_dir: Path) -> tuple[dict[str, Any], list[SweepAxis]]:
    """The plan a sweep folder was started with: (scenario tree, axes)."""
    try:
        manifest = yaml12.safe_load(read_text(out_dir / MANIFEST, "sweep plan", SCENARIO_MAX_BYTES))
        tree, specs = manifest["scenario"], manifest["sweep"]
        digest = manifest.get("digest")
        axes = [SweepAxis.parse(spec) for spec in specs]
    except (yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        raise SweepError(f"--resume {out_dir}: {MANIFEST} is malformed ({type(err).__name__})") from None
    if digest is not None and digest != plan_digest(tree, specs):
        raise SweepError(f"--resume {out_dir}: {MANIFEST} was changed after the sweep started (its digest no "
                         "longer matches): a sweep's plan cannot change; start a new sweep")
    return tree, axes


def plan_digest(tree: dict[str, Any], specs: list[str]) -> str:
    """sha256 of a sweep's plan, stored in its ``sweep.yaml``: a plan edited by hand is refused."""
    text = json.dumps({"scenario": tree, "sweep": specs}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def is_sweep_folder(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


def check_points(base_tree: dict[str, Any], axes: list[SweepAxis]) -> list[str]:
    """``--check`` for every point: load its data, build its model and network, train nothing."""
    from fedgc.core.parts import federated_data
    from fedgc.scenario.readiness import check_scenario

    lines = []
    for point, scenario in plan(base_tree, axes):
        try:
            lines.append(f"{point.folder}: {check_scenario(scenario, federated_data(scenario))}")
        except (ValueError, OSError) as err:
            raise SweepError(f"{point.folder}: {err}".splitlines()[0]) from None
    return lines
