"""The scenario schema: one YAML file describes a whole simulated federated training.

Every section is a pydantic model with ``extra="forbid"``: an unknown key is an error, and every
error is reported in one line that names the field and the rule (see ``ScenarioError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fedgc.compress.config import CompressionConfig
from fedgc.compress.downlink import DownlinkConfig
from fedgc.data.config import DataConfig
from fedgc.network.config import NetworkConfig


class ScenarioError(ValueError):
    """A scenario cannot be used; ``str(err)`` is one line naming the field and the rule."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(_Section):
    name: str = Field("small_cnn", description="model name (see fedgc.models.MODELS)")
    options: dict[str, Any] = Field(default_factory=dict, description="model-specific options (docs/data-and-models.md)")

    @model_validator(mode="after")
    def _known_model(self) -> ModelConfig:
        from fedgc.models import MODELS, validate_model_options

        if self.name not in MODELS:
            raise ValueError(f"unknown model {self.name!r}; known: {', '.join(MODELS)}")
        validate_model_options(self.name, self.options)
        return self


class ClientConfig(_Section):
    local_steps: int | None = Field(None, ge=1, description="SGD steps per round (exclusive with epochs)")
    epochs: float | None = Field(None, gt=0.0, description="passes over the client's data per round")
    batch_size: int = Field(32, ge=1)
    lr: float = Field(0.05, gt=0.0)
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="local optimizer momentum")
    weight_decay: float = Field(0.0, ge=0.0)

    @model_validator(mode="after")
    def _steps_or_epochs(self) -> ClientConfig:
        if self.local_steps is not None and self.epochs is not None:
            raise ValueError("set either local_steps or epochs, not both")
        if self.local_steps is None and self.epochs is None:
            self.local_steps = 1
        return self


class StrategyConfig(_Section):
    fraction: float = Field(1.0, gt=0.0, le=1.0, description="fraction of clients selected per round")
    min_clients: int = Field(1, ge=1, description="fewest completed updates for a round to count")
    too_few: Literal["skip", "retry"] = Field(
        "skip", description="a round with fewer than min_clients updates: skip it, or retry it (same round number)")
    max_retries: int = Field(3, ge=0, le=1000, description="too_few: retry — attempts after the first, then skip")
    server_optimizer: Literal["sgd", "momentum", "adam"] = "sgd"
    server_lr: float = Field(1.0, gt=0.0)
    server_momentum: float = Field(0.9, ge=0.0, lt=1.0, description="FedAvgM momentum (server_optimizer: momentum)")
    adam_beta1: float = Field(0.9, ge=0.0, lt=1.0)
    adam_beta2: float = Field(0.99, ge=0.0, lt=1.0)
    adam_tau: float = Field(1e-3, gt=0.0, description="FedAdam's adaptivity epsilon")
    clip_update_norm: float | None = Field(None, gt=0.0, description="server bounds each update's L2 norm")
    max_num_examples: int = Field(10_000_000, ge=1, description="replies claiming more examples are rejected")


class EvalConfig(_Section):
    target_accuracy: float = Field(0.9, gt=0.0, le=1.0)
    every: int = Field(1, ge=1, description="evaluate the global model every N rounds (and the last)")
    batch_size: int = Field(1024, ge=1)


class Scenario(_Section):
    name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    seed: int = Field(0, ge=0, lt=2**32)
    rounds: int = Field(..., ge=1, le=1_000_000)
    engine: Literal["inline", "flower"] = "inline"
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    client: ClientConfig = Field(default_factory=ClientConfig)
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    downlink: DownlinkConfig = Field(default_factory=DownlinkConfig)
    strategy: StrategyConfig = Field(default_factory=StrategyConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    checkpoint_every: int = Field(10, ge=0, description="write a resumable checkpoint every N rounds (0: never)")


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "scenario"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key (not part of the scenario schema)"
    elif first["type"] == "missing":
        msg = "required key is missing"
    more = len(err.errors()) - 1
    return f"{where}: {msg}" + (f" (and {more} more error{'s' if more > 1 else ''})" if more else "")


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    """``set_dotted(t, "a.b", v)`` sets ``t["a"]["b"] = v``, creating sections as needed."""
    parts = key.split(".")
    if not all(parts):
        raise ScenarioError(f"--set {key}: empty key component")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ScenarioError(f"--set {key}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """``"a.b=1e-3"`` → ``("a.b", 0.001)``: the value is parsed as YAML (numbers, booleans, null, lists)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {text!r}: expected KEY=VALUE")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string; a number is meant
        try:
            value = float(value)
        except ValueError:
            pass
    return key.strip(), value


def load_tree(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():
        raise ScenarioError(f"{path}: is a directory, expected a scenario YAML file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(f"{path}: cannot read ({err.__class__.__name__})") from None
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ScenarioError(f"{path}: invalid YAML{where}") from None
    if tree is None:
        raise ScenarioError(f"{path}: empty scenario file")
    if not isinstance(tree, dict):
        raise ScenarioError(f"{path}: expected a mapping of scenario keys at the top level")
    return tree


def validate(tree: dict[str, Any]) -> Scenario:
    try:
        return Scenario.model_validate(tree)
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
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
