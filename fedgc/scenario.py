"""The scenario schema: one YAML file describes a whole simulated federated training.

Every section is a pydantic model with ``extra="forbid"``: an unknown key is an error, and every
error is reported in one line that names the field and the rule (see ``ScenarioError``).

Input rules (docs/reliability.md, "Scenario input"):

* files are read as YAML 1.2 (``fedgc.yaml12``): ``010`` is ten, ``1:30`` and ``yes`` are strings,
  a duplicate key is an error; ``--set`` values follow the same rules;
* validation is strict: ``true`` is not a number and ``2.0`` is not an integer;
* every number must be finite. No key gives infinity a meaning: where a limit can be absent
  (``network.deadline_s``, ``compression.clip_norm``, ...) the key is ``null``;
* paths resolve as ``fedgc.paths`` says: relative to the scenario file, ``${VAR}`` expanded, and the
  loaded scenario holds absolute paths.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from fedgc import yaml12
from fedgc.bounded import SCENARIO_MAX_BYTES, read_text
from fedgc.compress.config import CompressionConfig, keep_options_for
from fedgc.compress.downlink import DownlinkConfig
from fedgc.data.config import DataConfig
from fedgc.execution.device import DEVICE_PATTERN
from fedgc.extensions import resolve_scenario_paths
from fedgc.network.config import NetworkConfig
from fedgc.network.flat_form import fold
from fedgc.network.sections import SECTIONS
from fedgc.paths import PathError, resolve_paths
from fedgc.scenario_errors import ScenarioError, did_you_mean, unknown_key_message, yaml_syntax_message
from fedgc.scenario_sections import (  # noqa: F401 — the sections, and their bounds, by their usual names
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_LOCAL_STEPS,
    ClientConfig,
    ClientStateConfig,
    EvalConfig,
    ModelConfig,
    RayConfig,
    StrategyConfig,
    _Section,
)
from fedgc.yaml12 import DuplicateKeyError
from fedgc.yaml12 import dump as yaml12_dump
from fedgc.yaml12 import load as yaml12_load


class Scenario(_Section):
    name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    seed: int = Field(0, ge=0, lt=2**32)
    rounds: int = Field(..., ge=1, le=1_000_000)
    engine: Literal["inline", "flower"] = "inline"
    device: str = Field("auto", pattern=DEVICE_PATTERN,
                        description="where clients train and the server evaluates: auto (the first CUDA GPU if "
                                    "there is one, else the CPU), cpu, cuda or cuda:N (docs/performance.md)")
    deterministic: bool = Field(False, description="on CUDA: deterministic algorithms, so that a seed gives the same "
                                "metrics, at some speed (docs/performance.md); the CPU is deterministic anyway")
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    client: ClientConfig = Field(default_factory=ClientConfig)
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    downlink: DownlinkConfig = Field(default_factory=DownlinkConfig)
    strategy: StrategyConfig = Field(default_factory=StrategyConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    client_state: ClientStateConfig = Field(default_factory=ClientStateConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    checkpoint_every: int = Field(10, ge=0, le=1_000_000,
                                  description="write a resumable checkpoint every N rounds (0: never)")

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
        """Read and validate a scenario file; ``overrides``: ``{dotted key: value}`` as ``--set`` takes."""
        return load_scenario(path).with_overrides(overrides or {})

    @classmethod
    def from_dict(cls, tree: Mapping[str, Any]) -> Scenario:
        """Validate a mapping of scenario keys (nested sections, as in a YAML file)."""
        return validate(dict(tree))

    @classmethod
    def build(cls, **keys: Any) -> Scenario:
        """From keyword arguments: ``Scenario.build(name="x", rounds=5, data={"dataset": "digits"})``."""
        return validate(keys)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Scenario:
        """A copy with ``{dotted key: value}`` set (the keys ``--set`` takes), validated again."""
        tree = self.model_dump(mode="json")
        for key, value in overrides.items():
            set_dotted(tree, key, value)
        return validate(tree)

    def to_yaml(self) -> str:
        """The scenario, every default filled in, as YAML (what a run folder's ``scenario.yaml`` holds)."""
        return dump_scenario(self)

    @model_validator(mode="after")
    def _gpu_share_needs_flower(self) -> Scenario:
        if self.client.gpu_share is not None and self.engine != "flower":
            raise ValueError("client.gpu_share: only applies to engine: flower (Flower's simulation runtime); "
                             "the inline engine trains in this process")
        if self.engine != "flower" and (self.ray.address is not None or self.ray.client_cpus is not None):
            raise ValueError("ray: only applies to engine: flower (Flower's simulation runtime); "
                             "the inline engine trains in this process")
        return self

    @model_validator(mode="after")
    def _rounds_can_count(self) -> Scenario:
        # The number of updates a round keeps: fedgc.flower.strategy.SelectionPolicy.wanted (over-selection
        # selects more clients but keeps this many).
        kept = max(1, round(self.strategy.fraction * self.data.num_clients))
        if self.strategy.min_clients > kept:
            raise ValueError(
                f"strategy.min_clients: {self.strategy.min_clients} is more than the {kept} update(s) a round keeps "
                f"(strategy.fraction {self.strategy.fraction} x data.num_clients {self.data.num_clients}): "
                "no round could ever count")
        return self


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    loc, tagged = list(first["loc"]), None
    if len(loc) > 2 and loc[0] == "network" and loc[1] in SECTIONS:
        tagged = (loc[1], loc.pop(2))  # pydantic puts a tagged union's tag in the path: network.link.trace.down
    where = ".".join(str(p) for p in loc) or "scenario"
    msg = first["msg"].removeprefix("Value error, ")
    named = re.match(r"^([a-z_]+(?:\.[a-z0-9_]+)+): (.*)$", msg)
    if named and (not loc or named.group(1).startswith(where + ".") or named.group(1) == where):
        where, msg = named.groups()  # a rule names its own field
    if first["type"] == "extra_forbidden":
        msg = unknown_key_message(Scenario, first["loc"])
        if tagged:
            keys = list(SECTIONS[tagged[0]][0][tagged[1]].model_fields)
            guess = did_you_mean(str(first["loc"][-1]), keys)
            msg = (f"not a key of {tagged[0]} {tagged[1]} (" + (f"did you mean `{guess}`? " if guess else "")
                   + f"its keys: {', '.join(keys)})")
    elif first["type"] == "missing":
        msg = f"required when {tagged[0]} is {tagged[1]}" if tagged else "required key is missing"
    elif first["type"] == "union_tag_invalid":
        msg = f"unknown name {first['ctx']['tag']!r} (known: {first['ctx']['expected_tags'].replace(chr(39), '')})"
    elif first["type"] == "union_tag_not_found":
        msg = "needs a name (e.g. {name: ...})"
    more = len(err.errors()) - 1
    return f"{where}: {msg}" + (f" (and {more} more error{'s' if more > 1 else ''})" if more else "")


MAX_KEY_PARTS = 8  # the deepest scenario key has 4 (network.link.up.trace, ...)
MAX_KEY_CHARS = 256


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    """``set_dotted(t, "a.b", v)`` sets ``t["a"]["b"] = v``, creating sections as needed."""
    if len(key) > MAX_KEY_CHARS or key.count(".") >= MAX_KEY_PARTS:
        raise ScenarioError(f"--set {key[:40]}...: a key has at most {MAX_KEY_PARTS} dotted parts and "
                            f"{MAX_KEY_CHARS} characters")
    parts = key.split(".")
    if not all(parts):
        raise ScenarioError(f"--set {key}: empty key component")
    network = tree.get("network")
    if (len(parts) > 2 and parts[0] == "network" and parts[1] in SECTIONS and isinstance(network, dict)
            and not isinstance(network.get(parts[1]), dict)):
        # A key inside network.link (or device, ...) over a file in the flat form: fold it first.
        try:
            tree["network"] = fold(network)
        except ValueError as err:
            raise ScenarioError(str(err)) from None
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ScenarioError(f"--set {key}: {part} is not a section")
        node = child
    if len(parts) == 2 and parts[1] == "name" and parts[0] in ("compression", "downlink"):
        # the options of the compressor named so far stay kept for it (fedgc.compress.config.keep_options_for)
        model = CompressionConfig if parts[0] == "compression" else DownlinkConfig
        keep_options_for(node, value, model.model_fields["name"].default)
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """``"a.b=1e-3"`` → ``("a.b", 0.001)``: the value is YAML 1.2 (numbers, true/false, null, lists);
    ``010`` is ten and ``1:30`` a string, as in a scenario file."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {text!r}: expected KEY=VALUE")
    if len(raw) > SCENARIO_MAX_BYTES:
        raise ScenarioError(f"--set {key.strip()[:40]}: a value of {len(raw)} characters is too long")
    try:
        value = yaml12_load(raw) if raw.strip() else ""
    except DuplicateKeyError as err:
        raise ScenarioError(f"--set {key.strip()}: {err.problem} (each key may appear once)") from None
    except yaml12.LimitError as err:
        raise ScenarioError(f"--set {key.strip()}: YAML {err.problem}") from None
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def _duplicate_key(path: Path, err: DuplicateKeyError) -> ScenarioError:
    line = f" at line {err.problem_mark.line + 1}" if err.problem_mark is not None else ""
    return ScenarioError(f"{path}: {err.problem}{line} (each key may appear once)")


def parse_yaml(text: str, where: str) -> Any:
    """One YAML 1.2 document, bounded (``fedgc.yaml12``); errors name ``where`` and the line."""
    try:
        return yaml12_load(text)
    except DuplicateKeyError as err:
        raise _duplicate_key(Path(where), err) from None
    except yaml12.LimitError as err:
        raise ScenarioError(f"{where}: YAML {err.problem} at line {err.problem_mark.line + 1}") from None
    except yaml.YAMLError as err:
        raise ScenarioError(yaml_syntax_message(where, text, err)) from None


def load_tree(path: str | Path) -> dict[str, Any]:
    """The scenario file as a tree, read as YAML 1.2, with its relative paths made absolute from the
    file's directory (``fedgc.paths``)."""
    path = Path(path)
    if path.is_dir():
        raise ScenarioError(f"{path}: is a directory, expected a scenario YAML file")
    if not path.exists():
        raise ScenarioError(f"{path}: no such scenario file")
    try:
        text = read_text(path, "scenario", SCENARIO_MAX_BYTES)
    except ValueError as err:
        raise ScenarioError(str(err).removeprefix("scenario ")) from None
    tree = parse_yaml(text, str(path))
    if tree is None:
        raise ScenarioError(f"{path}: empty scenario file")
    if not isinstance(tree, dict):
        raise ScenarioError(f"{path}: expected a mapping of scenario keys at the top level")
    _resolve(tree, path.parent)
    return tree


def _resolve(tree: dict[str, Any], base: Path) -> None:
    try:
        resolve_paths(tree, base)
    except PathError as err:
        raise ScenarioError(str(err)) from None


def _reject_non_finite(node: Any, where: str = "") -> None:
    """Every number in a scenario is finite (no key gives infinity a meaning; absent limits are null)."""
    if isinstance(node, float) and not math.isfinite(node):
        raise ScenarioError(f"{where or 'scenario'}: must be a finite number (got {node}); "
                            "no scenario key takes inf or nan (use null for 'no limit' where the key allows it)")
    if isinstance(node, dict):
        for key, value in node.items():
            _reject_non_finite(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _reject_non_finite(value, f"{where}.{i}")


def validate(tree: dict[str, Any]) -> Scenario:
    """Validate a scenario tree (strictly, finite numbers only); relative paths in it are taken from
    the current directory. The caller's tree is not modified."""
    tree = copy.deepcopy(tree)
    _reject_non_finite(tree)
    if isinstance(tree, dict):
        _resolve(tree, Path.cwd())
    resolve_scenario_paths(tree)  # a user's model, dataset or compressor named by import path (PluginError)
    try:
        return Scenario.model_validate(tree, strict=True)
    except ValidationError as err:
        raise ScenarioError(_one_line(err)) from None


def load_scenario(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Read, override (``--set``) and validate a scenario file."""
    tree = load_tree(path)
    for text in overrides:
        set_dotted(tree, *parse_override(text))
    return validate(tree)


def dump_scenario(scenario: Scenario) -> str:
    """The resolved scenario (every default filled in) as YAML."""
    return yaml12_dump(scenario.model_dump(mode="json"))
