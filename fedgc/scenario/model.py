"""The scenario schema: one YAML file describes a whole simulated federated training.

Every section is a pydantic model with ``extra="forbid"``: an unknown key is an error, and every
error is reported in one line that names the field and the rule (see ``ScenarioError``).

Input rules (docs/reliability.md, "Scenario input"):

* files are read as YAML 1.2 (``fedgc.scenario.yaml12``): ``010`` is ten, ``1:30`` and ``yes`` are strings,
  a duplicate key is an error; ``--set`` values follow the same rules;
* validation is strict: ``true`` is not a number and ``2.0`` is not an integer;
* every number must be finite. No key gives infinity a meaning: where a limit can be absent
  (``network.deadline_s``, ``compression.clip_norm``, ...) the key is ``null``;
* paths resolve as ``fedgc.scenario.paths`` says: relative to the scenario file, ``${VAR}`` expanded, and the
  loaded scenario holds absolute paths.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information (types-PyYAML not installed)
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, model_validator

from fedgc.bounded import SCENARIO_MAX_BYTES, read_text
from fedgc.compress.base import CompressorOptions
from fedgc.compress.config import SECTION_KEYS as COMPRESSION_SECTION_KEYS
from fedgc.compress.config import CompressionConfig, keep_options_for
from fedgc.compress.downlink import DownlinkConfig
from fedgc.data.config import MAX_DATA_BYTES, DataConfig, known_input, synthetic_bytes
from fedgc.execution.device import DEVICE_PATTERN
from fedgc.network.config import NetworkConfig
from fedgc.network.flat_form import fold
from fedgc.network.sections import SECTIONS
from fedgc.plugins.registry import (
    PLUGIN_KEYS,
    is_built_in,
    is_known,
    reading_records_now,
    resolve_scenario_paths,
    unchecked_plugins,
)
from fedgc.scenario import builtin as builtin_scenarios
from fedgc.scenario import yaml12
from fedgc.scenario.errors import ScenarioError, did_you_mean, unknown_key_message, yaml_syntax_message
from fedgc.scenario.paths import PathError, resolve_paths
from fedgc.scenario.sections import (  # noqa: F401 — the sections, and their bounds, by their usual names
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
from fedgc.scenario.yaml12 import DuplicateKeyError
from fedgc.scenario.yaml12 import dump as yaml12_dump
from fedgc.scenario.yaml12 import load as yaml12_load

MAX_NAME_CHARS = 200  # the run folder is named after it (a file name holds 255 bytes)


class Scenario(_Section):
    name: str = Field(..., min_length=1, max_length=MAX_NAME_CHARS, pattern=r"^[A-Za-z0-9_.-]+$")
    seed: int = Field(0, ge=0, lt=2**32)
    rounds: int = Field(..., ge=1, le=1_000_000)
    engine: Literal["inline", "flower"] = "inline"
    device: str = Field("auto", pattern=DEVICE_PATTERN,
                        description="where clients train and the server evaluates: auto (the first CUDA GPU if "
                                    "there is one, else the CPU), cpu, cuda or cuda:N (docs/performance.md)")
    deterministic: bool = Field(False, description="on CUDA: deterministic algorithms, so that a seed gives the same "
                                "metrics, at some speed (docs/performance.md); the CPU is deterministic anyway")
    # ignore[arg-type] below: without the pydantic.mypy plugin, mypy's dataclass_transform takes a positional
    # Field default (Field(0, ...)) for no default, so it sees DataConfig() etc. missing arguments
    data: DataConfig = Field(default_factory=DataConfig)  # type: ignore[arg-type]
    model: ModelConfig = Field(default_factory=ModelConfig)  # type: ignore[arg-type]
    client: ClientConfig = Field(default_factory=ClientConfig)  # type: ignore[arg-type]
    compression: CompressionConfig = Field(default_factory=CompressionConfig)  # type: ignore[arg-type]
    downlink: DownlinkConfig = Field(default_factory=DownlinkConfig)  # type: ignore[arg-type]
    strategy: StrategyConfig = Field(default_factory=StrategyConfig)  # type: ignore[arg-type]
    network: NetworkConfig = Field(default_factory=NetworkConfig)  # type: ignore[arg-type]
    eval: EvalConfig = Field(default_factory=EvalConfig)  # type: ignore[arg-type]
    client_state: ClientStateConfig = Field(default_factory=ClientStateConfig)  # type: ignore[arg-type]
    ray: RayConfig = Field(default_factory=RayConfig)  # type: ignore[arg-type]
    checkpoint_every: int = Field(10, ge=0, le=1_000_000,
                                  description="write a resumable checkpoint every N rounds (0: never)")
    # The plugins validated by name only (``validate(..., imports=False)``): "model my_pkg:Net", ...
    _unchecked: tuple[str, ...] = PrivateAttr(default=())

    @property
    def unchecked_plugins(self) -> tuple[str, ...]:
        """The plugins this scenario names that were not imported when it was read (``kind name``, e.g.
        ``model my_pkg.models:Net``): their sections hold what was written, unchecked. Running the
        scenario imports and checks them (``fedgc.run``, ``Run.model``)."""
        return self._unchecked

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
        """Read and validate a scenario file (or the built-in scenario a bare name that is no file here
        names: ``fedgc scenarios``); ``overrides``: ``{dotted key: value}`` as ``--set`` takes."""
        if not isinstance(path, (str, Path)):
            raise ScenarioError(f"scenario: expected a YAML file's path or a built-in's name, not {type(path).__name__}")
        if overrides is not None and not isinstance(overrides, Mapping):
            raise ScenarioError(f"overrides: expected a mapping of dotted keys to values, not {type(overrides).__name__}")
        return load_scenario(path).with_overrides(overrides or {})

    @classmethod
    def from_dict(cls, tree: Mapping[str, Any]) -> Scenario:
        """Validate a mapping of scenario keys (nested sections, as in a YAML file)."""
        if not isinstance(tree, Mapping):
            raise ScenarioError(f"scenario: expected a mapping of scenario keys, not {type(tree).__name__}")
        return validate(dict(tree))

    @classmethod
    def build(cls, **keys: Any) -> Scenario:
        """From keyword arguments: ``Scenario.build(name="x", rounds=5, data={"dataset": "digits"})``."""
        return validate(keys)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Scenario:
        """A copy with ``{dotted key: value}`` set (the keys ``--set`` takes), validated again."""
        if not isinstance(overrides, Mapping) or len(overrides) > MAX_TREE_VALUES:
            raise ScenarioError(f"overrides: expected a mapping of at most {MAX_TREE_VALUES:,} dotted keys")
        tree = self.model_dump(mode="json")
        for key, value in overrides.items():
            if not isinstance(key, str):
                raise ScenarioError(f"overrides: a key is a dotted string, not {type(key).__name__}")
            set_dotted(tree, key, value)
        return validate(tree, imports=not self._unchecked)

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
    def _data_fits(self, info: ValidationInfo) -> Scenario:
        if self.data.dataset == "synthetic" and ("data", "dataset") not in _unchecked_keys(info):
            size = synthetic_bytes(self.data.num_clients, self.data.synthetic, self.seed)
            if size > MAX_DATA_BYTES:
                raise ValueError(
                    f"data.synthetic: {self.data.num_clients:,} clients of dimension {self.data.synthetic.dimension:,} "
                    f"would allocate {size / 2**30:.1f} GiB (seed {self.seed}'s device sizes), more than the "
                    f"{MAX_DATA_BYTES / 2**30:.0f} GiB fedgc generates; lower the clients or the dimension, or set "
                    "synthetic.max_samples_per_device")
        return self

    @model_validator(mode="after")
    def _model_fits(self, info: ValidationInfo) -> Scenario:
        from fedgc.models import estimated_parameters, max_parameters

        unchecked = _unchecked_keys(info)
        if ("model", "name") in unchecked or not is_built_in("model", self.model.name):
            return self  # a plugin's builder is its own code: counted when it is built, never here
        known = None if ("data", "dataset") in unchecked else known_input(self.data)
        count = None
        for shape, classes in ([known] if known is not None else []) + [((1,), 2)]:  # then the smallest input
            try:
                count = estimated_parameters(self.model.name, shape, classes, self.model.options)
                break
            except Exception:  # noqa: BLE001 — a model that cannot take this input: building it says why
                known = None
        limit = max_parameters()
        if count is None:
            return self
        if count > limit:
            what = f"input {shape} and {classes} classes" if known is not None else "the smallest input"
            raise ValueError(f"model.options: model {self.model.name} has {'' if known else 'at least '}{count:,} "
                             f"parameters for {what}, more than the {limit:,} fedgc builds "
                             "(FEDGC_MAX_PARAMETERS raises it)")
        return self

    @model_validator(mode="after")
    def _rounds_can_count(self) -> Scenario:
        # The number of updates a round keeps: fedgc.core.parts.SelectionPolicy.wanted (over-selection
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
            # a tagged union's tag in pydantic's error location is a string (its name in the section)
            keys = list(SECTIONS[tagged[0]][0][cast(str, tagged[1])].model_fields)
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
    """One YAML 1.2 document, bounded (``fedgc.scenario.yaml12``); errors name ``where`` and the line."""
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
    file's directory (``fedgc.scenario.paths``). A bare name (``quickstart``, ``quickstart.yaml``) that is nothing
    in the current folder is the built-in scenario of that name (``fedgc.scenario.builtin``)."""
    path = Path(path)
    if path.is_dir():
        raise ScenarioError(f"{path}: is a directory, expected a scenario YAML file")
    if not path.exists():
        bare = str(path) == path.name and not os.path.lexists(path)
        built_in = builtin_scenarios.built_in(path.name) if bare else None
        if built_in is None:
            hint = (f" and no built-in scenario of that name (built-in: {', '.join(builtin_scenarios.names())})"
                    if bare else "")
            raise ScenarioError(f"{path}: no such scenario file{hint}")
        path = built_in
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


# A tree given from Python is bounded as a YAML file is (fedgc.scenario.yaml12): depth, values, and no container
# holding itself; its strings together as a scenario file's bytes, and its integers to 64 bits.
MAX_TREE_DEPTH = yaml12.MAX_DEPTH
MAX_TREE_VALUES = yaml12.MAX_NODES
MAX_INT_BITS = 64


def check_tree(tree: Any) -> None:
    """``ScenarioError`` (one line) unless ``tree`` is within the bounds above; visits at most
    ``MAX_TREE_VALUES`` values, never deeper than ``MAX_TREE_DEPTH`` (no recursion past it)."""
    values, chars = 1, 0  # the values seen: counted as their container is opened, before any is visited
    stack: list[tuple[Any, int, str]] = [(tree, 1, "scenario")]
    path_ids: list[int] = []  # the containers from the root to the one being visited
    while stack:
        node, depth, where = stack.pop()
        if node is _LEAVE:
            path_ids.pop()
            continue
        if isinstance(node, str):
            chars += len(node)
            if chars > SCENARIO_MAX_BYTES:
                raise ScenarioError(f"{where}: the scenario's strings hold more than {SCENARIO_MAX_BYTES:,} characters")
        elif isinstance(node, int) and not isinstance(node, bool) and node.bit_length() > MAX_INT_BITS:
            raise ScenarioError(f"{where}: an integer of {node.bit_length():,} bits is no scenario value")
        elif isinstance(node, (dict, list, tuple)):
            if id(node) in path_ids:
                raise ScenarioError(f"{where}: contains itself")
            if depth > MAX_TREE_DEPTH:
                raise ScenarioError(f"{where}: nested more than {MAX_TREE_DEPTH} levels deep")
            values += len(node)
            if values > MAX_TREE_VALUES:
                raise ScenarioError(f"{where}: the scenario holds more than {MAX_TREE_VALUES:,} values")
            path_ids.append(id(node))
            stack.append((_LEAVE, depth, where))
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, value in items:
                label = str(key)[:40] if isinstance(key, (str, int)) else type(key).__name__
                if isinstance(key, str):
                    chars += len(key)
                stack.append((value, depth + 1, (f"{where}.{label}" if where != "scenario" else label)[:120]))


_LEAVE = object()  # check_tree's marker: the walk leaves a container


def _unchecked_keys(info: ValidationInfo) -> dict[tuple[str, str], str]:
    # validate() puts the plugins validated by name in the context (pydantic types the context as Any)
    return cast("dict[tuple[str, str], str]",
                (info.context or {}).get("unchecked", {}) if info is not None else {})


class _UncheckedOptions(CompressorOptions):
    """A compressor plugin's options read without importing it: the common ones checked, its own kept as written."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: Input should be a valid dictionary")
    return value


def _stand_ins(tree: dict[str, Any], unchecked: dict[tuple[str, str], str]) -> dict[str, Any]:
    """Each unchecked plugin in ``tree`` replaced by a built-in that takes no options, so the rest of the
    scenario is validated as usual; returns what the plugins' sections held, for ``_put_back``."""
    held: dict[str, Any] = {}
    if ("model", "name") in unchecked:
        held["model.options"] = _mapping(tree["model"].get("options"), "model.options")
        tree["model"] = {**tree["model"], "name": "logreg", "options": {}}
    if ("data", "dataset") in unchecked:
        tree["data"] = {**tree["data"], "dataset": "digits"}  # like a user's data set: no files, no root
    for key, stand_in in (("aggregation", "mean"), ("server_optimizer", "sgd")):
        if ("strategy", key) in unchecked:
            options = "aggregation_options" if key == "aggregation" else "server_optimizer_options"
            held[f"strategy.{options}"] = _mapping(tree["strategy"].get(options), f"strategy.{options}")
            tree["strategy"] = {**tree["strategy"], key: stand_in, options: {}}
    if ("compression", "name") in unchecked:
        from fedgc.compress.registry import COMPRESSORS

        raw, name = tree["compression"], unchecked[("compression", "name")]
        section = {k: v for k, v in raw.items() if k in COMPRESSION_SECTION_KEYS or (isinstance(v, dict) and k in COMPRESSORS)}
        flat = {k: v for k, v in raw.items() if k not in section}
        warmup = section.get("warmup_for")
        if isinstance(warmup, list):
            held["compression.warmup_for"] = warmup
            section["warmup_for"] = [n for n in warmup if n != name]
        held["compression.options"] = _unchecked_options(flat, "compression")
        tree["compression"] = {**section, "name": "none"}
    if ("downlink", "name") in unchecked:
        from fedgc.compress.downlink import DOWNLINK_COMPRESSORS, FIXED

        raw = _mapping(tree.get("downlink"), "downlink")
        section = {k: v for k, v in raw.items()
                   if k in ("name", "density") or (isinstance(v, dict) and k in DOWNLINK_COMPRESSORS)}
        flat = {k: v for k, v in raw.items() if k not in section}
        for key, value in FIXED.items():  # the downlink sets it itself: not a key of the section
            if key in flat:
                raise ScenarioError(f"downlink.{key}: not a key here (downlink always has {key}: {str(value).lower()})")
        held["downlink.options"] = _unchecked_options({**flat, **FIXED}, "downlink")
        tree["downlink"] = {**section, "name": "none"}
    return held


def _unchecked_options(flat: dict[str, Any], where: str) -> _UncheckedOptions:
    """A compressor plugin's options as written: the common ones checked, its own kept (``_stand_ins``)."""
    try:
        return _UncheckedOptions.model_validate(flat, strict=True)
    except ValidationError as err:
        first = err.errors()[0]
        raise ScenarioError(f"{where}.{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


def _put_back(scenario: Scenario, unchecked: dict[tuple[str, str], str], held: dict[str, Any]) -> None:
    """The plugins' names (and their sections as written) back in place of ``_stand_ins``' built-ins."""
    for (section, key), name in unchecked.items():
        setattr(getattr(scenario, section), key, name)
    for dotted, value in held.items():
        section, key = dotted.split(".")
        setattr(getattr(scenario, section), key, value)
    kinds = {(section, key): kind for section, key, kind in PLUGIN_KEYS}
    scenario._unchecked = tuple(f"{kinds[where]} {name}" for where, name in unchecked.items())


def _downlink_name(tree: Any) -> Any:
    section = tree.get("downlink") if isinstance(tree, dict) else None
    return section.get("name") if isinstance(section, dict) else None


def validate(tree: dict[str, Any], *, imports: bool = True) -> Scenario:
    """Validate a scenario tree (strictly, finite numbers only); relative paths in it are taken from
    the current directory. The caller's tree is not modified. ``imports=False`` reads without running
    any plugin: an import path the process has not imported is checked as a name only, and its section
    kept as written (``Scenario.unchecked_plugins``); for ``fedgc check``, ``fedgc.load_run`` and the
    refusals of ``--resume``."""
    check_tree(tree)
    tree = copy.deepcopy(tree)
    _reject_non_finite(tree)
    if isinstance(tree, dict):
        _resolve(tree, Path.cwd())
    unchecked: dict[tuple[str, str], str] = {}
    held: dict[str, Any] = {}
    if imports:
        resolve_scenario_paths(tree)  # a user's model, dataset or compressor named by import path (PluginError)
    else:
        unchecked = unchecked_plugins(tree)
        if not reading_records_now():  # a downlink runs stateless built-ins only: DownlinkConfig says so
            unchecked.pop(("downlink", "name"), None)
        elif isinstance(name := _downlink_name(tree), str) and is_known("compressor", name) \
                and not is_built_in("compressor", name):
            unchecked[("downlink", "name")] = name  # a record names it: data, whoever registered it
        held = _stand_ins(tree, unchecked)
    try:
        scenario = Scenario.model_validate(tree, strict=True, context={"unchecked": unchecked})
    except ValidationError as err:
        raise ScenarioError(_one_line(err)) from None
    if unchecked:
        _put_back(scenario, unchecked, held)
    return scenario


def load_scenario(path: str | Path, overrides: list[str] | tuple[str, ...] = (), *, imports: bool = True) -> Scenario:
    """Read, override (``--set``) and validate a scenario file (``imports=False``: see ``validate``)."""
    tree = load_tree(path)
    for text in overrides:
        set_dotted(tree, *parse_override(text))
    return validate(tree, imports=imports)


def dump_scenario(scenario: Scenario) -> str:
    """The resolved scenario (every default filled in) as YAML."""
    return yaml12_dump(scenario.model_dump(mode="json"))
