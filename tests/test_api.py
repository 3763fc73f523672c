"""fedgc's public Python API (docs/api.md): what ``import fedgc`` promises, and that it keeps it.

The names, their signatures and every public class's members are pinned here, so a change to them is a
deliberate edit of this file and of docs/api.md (whose code blocks tests/test_api_docs.py runs). The
behaviour: ``fedgc.run`` in memory gives the same rounds as the command line's run folder; a per-round
callback sees every round; a run folder and a sweep folder read back; bad input is one line
(``ScenarioError``)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import asdict
from pathlib import Path

import pydantic
import pytest

import fedgc

pytestmark = pytest.mark.usefixtures("isolated_registries")

REPO = Path(__file__).resolve().parents[1]
TINY = {"name": "api-tiny", "seed": 3, "rounds": 2,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
        "model": {"name": "mlp", "options": {"hidden": [16]}},
        "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "topk", "density": 0.1},
        "strategy": {"fraction": 0.5}, "eval": {"every": 1}, "checkpoint_every": 0}

def shown(text: str) -> str:
    """A signature or annotation as pinned: quotes dropped (string and evaluated annotations read alike)
    and a fedgc module path dropped before a class name (the modules may move; the names may not)."""
    text = text.replace("'", "").replace('"', "").replace("typing.", "")
    return re.sub(r"\bfedgc(\.\w+)*\.(?=[A-Z])", "", text)


def signature_of(value: object) -> str:
    return shown(str(inspect.signature(value)))


def public_members(cls: type) -> dict[str, str]:
    """What a public class promises, by name: its fields (a dataclass's or a pydantic model's, with the
    annotation and default), and the methods, class methods, properties, nested classes and class
    attributes its classes define (with signatures, kinds and values). What ``object``, ``ABC`` or
    pydantic's ``BaseModel`` bring is theirs, not fedgc's promise."""
    inherited = set(dir(pydantic.BaseModel)) if issubclass(cls, pydantic.BaseModel) else set()
    out: dict[str, str] = {}
    if dataclasses.is_dataclass(cls):
        for field in dataclasses.fields(cls):
            default = "" if field.default is dataclasses.MISSING else f" = {field.default!r}"
            factory = "" if field.default_factory is dataclasses.MISSING else " = <factory>"
            out[field.name] = f"field {shown(str(field.type))}{default}{factory}"
    if issubclass(cls, pydantic.BaseModel):
        for name, field in cls.model_fields.items():
            annotation = field.annotation
            kind = annotation.__name__ if isinstance(annotation, type) else shown(str(annotation))
            default = "" if field.is_required() else (" = <factory>" if field.default_factory is not None
                                                      else f" = {field.default!r}")
            out[name] = f"field {kind}{default}"
    for name in dir(cls):
        if name.startswith("_") or name in out or name in inherited:
            continue
        owner = next(k for k in cls.__mro__ if name in vars(k))
        if owner.__module__.split(".")[0] in ("builtins", "abc", "pydantic"):
            continue
        raw = vars(owner)[name]
        if isinstance(raw, classmethod):
            out[name] = f"classmethod {signature_of(getattr(cls, name))}"
        elif isinstance(raw, staticmethod):
            out[name] = f"staticmethod {signature_of(getattr(cls, name))}"
        elif isinstance(raw, property):
            out[name] = "property"
        elif inspect.isfunction(raw):
            out[name] = f"method {signature_of(raw)}"
        elif isinstance(raw, type):
            out[name] = f"class {raw.__name__}"
        else:
            out[name] = f"attribute = {raw!r}"
    return dict(sorted(out.items()))


def changes(pinned: dict[str, str], now: dict[str, str], where: str) -> list[str]:
    """One line per difference: what was added, removed or changed, named ``fedgc.<where><name>``."""
    lines = [f"fedgc.{where}{name} removed (was {pinned[name]})" for name in pinned if name not in now]
    lines += [f"fedgc.{where}{name} added: {now[name]}" for name in now if name not in pinned]
    lines += [f"fedgc.{where}{name} changed: was {pinned[name]}, now {now[name]}"
              for name in pinned if name in now and now[name] != pinned[name]]
    return lines


# Every public name: its signature (a function's, or a class's constructor). The errors are pinned by
# their bases (ERRORS) and the Scenario by its fields (MEMBERS): pydantic's generated constructor shows
# its validators' metadata, which is pydantic's to word.
PUBLIC = {
    "AcceptedUpdate": "(node: int, payloads: dict[str, Payload], share: float, scale: float) -> None",
    "Aggregator": "()",
    "ClientRecord": "(round: int, attempt: int, node: int, outcome: str, phase: str | None = None, "
                    "reason: str | None = None, download_s: float | None = None, compute_s: float | None = None, "
                    "upload_s: float | None = None, bytes_down: int | None = None, bytes_up: int | None = None, "
                    "clipped: bool = False, capped: bool = False, norm_before_clip: float | None = None, "
                    "norm_after_clip: float | None = None) -> None",
    "Comparison": "(runs: list[Run], out_dir: Path | None = None) -> None",
    "CompressionContext": "(round: int = 1, density: float = 1.0, generator: torch.Generator | None = None, "
                          "num_clients: int = 1, memory: Memory | None = None) -> None",
    "Compressor": "()",
    "CompressorOptions": "(*, error_feedback: bool = True, value_dtype: Literal[fp32, fp16, int8, int4, sign] = fp32, "
                         "dense_small_tensors: bool = True) -> None",
    "DensePayload": "(values: torch.Tensor, shape: tuple[int, ...]) -> None",
    "FedgcError": None,
    "LowRankPayload": "(p: torch.Tensor, q: torch.Tensor, shape: tuple[int, ...]) -> None",
    "PluginError": None,
    "QuantizedPayload": "(codes: torch.Tensor, norms: torch.Tensor, levels: int, bucket_size: int, "
                        "shape: tuple[int, ...]) -> None",
    "RoundObserver": "()",
    "RoundRecord": "(round: int, sim_start_s: float = 0.0, sim_end_s: float = 0.0, round_duration_s: float = 0.0, "
                   "selected: int = 0, completed: int = 0, cut: int = 0, late: int = 0, discarded: int = 0, "
                   "failed: int = 0, rejected: int = 0, applied: int = 0, bytes_down: int = 0, bytes_up: int = 0, "
                   "dense_bytes_up: int = 0, density: float | None = None, achieved_density: float | None = None, "
                   "train_loss: float | None = None, accuracy: float | None = None, loss: float | None = None, "
                   "mean_download_s: float | None = None, mean_compute_s: float | None = None, "
                   "mean_upload_s: float | None = None, max_upload_s: float | None = None, "
                   "rejected_reasons: dict[str, int] = <factory>, applied_nodes: list[int] = <factory>, "
                   "skipped: bool = False, attempt: int = 0, downlink_density: float | None = None, "
                   "downlink_resets: int = 0, client_upload_bytes: list[int] = <factory>, "
                   "client_upload_s: list[float] = <factory>, clipped_nodes: list[int] = <factory>, "
                   "capped_nodes: list[int] = <factory>, norm_before_clip_median: float | None = None, "
                   "norm_before_clip_max: float | None = None, norm_after_clip_median: float | None = None, "
                   "locally_clipped: int | None = None) -> None",
    "Run": "(scenario: Scenario, summary: Summary, rounds: list[RoundRecord], clients: list[ClientRecord], "
           "weights: dict[str, torch.Tensor], out_dir: Path | None = None, label: str = ) -> None",
    "RunFolderError": None,
    "Scenario": None,
    "ScenarioError": None,
    "ServerOptimizer": "(lr: float = 1.0) -> None",
    "SignPayload": "(signs: torch.Tensor, pos_scale: float, neg_scale: float, shape: tuple[int, ...]) -> None",
    "SparsePayload": "(indices: torch.Tensor, values: torch.Tensor, shape: tuple[int, ...]) -> None",
    "Summary": "(name: str, rounds: int, final_accuracy: float | None, best_accuracy: float | None, sim_time_s: float, "
               "wall_time_s: float, bytes_up: int, bytes_down: int, dense_bytes_up: int, "
               "compression_ratio_up: float | None, target_accuracy: float, time_to_target_s: float | None, "
               "rounds_to_target: int | None, clients_completed: int, clients_dropped: int, clients_failed: int, "
               "updates_rejected: int, updates_applied: int, rounds_skipped: int = 0, clients_discarded: int = 0, "
               "stopped_reason: str = completed, cpu_kernels: str | None = None) -> None",
    "Sweep": "(runs: list[Run], out_dir: Path | None = None) -> None",
    "TernaryPayload": "(trits: torch.Tensor, scale: float, shape: tuple[int, ...]) -> None",
    "UserData": "(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, "
                "num_classes: int | None = None, groups: np.ndarray | None = None) -> None",
    "baseline": "(scenario: Scenario | dict[str, Any] | str | Path, out: str | Path | None = None, *, overwrite: bool = False, "
                "quiet: bool = True) -> Comparison",
    "load_run": "(path: str | Path) -> Run",
    "load_sweep": "(path: str | Path) -> Sweep",
    "plot": "(runs: Sequence[Run], out: str | Path) -> list[Path]",
    "register_aggregator": "(cls: type, name: str | None = None, *, replace: bool = False) -> None",
    "register_compressor": "(cls: type, name: str | None = None, *, replace: bool = False) -> None",
    "register_dataset": "(name: str, data: Any, *, replace: bool = False) -> None",
    "register_model": "(name: str, builder: Callable[..., Any], options: type[BaseModel] | None = None, *, "
                      "replace: bool = False) -> None",
    "register_server_optimizer": "(cls: type, name: str | None = None, *, replace: bool = False) -> None",
    "registered": "() -> list[PluginInfo]",
    "report": "(runs: Iterable[Run | str | Path], out: str | Path | None = None, fmt: str = md) -> str",
    "run": "(scenario: Scenario | dict[str, Any] | str | Path, out: str | Path | None = None, *, overwrite: bool = False, "
           "on_round: Callable[[RoundRecord], object] | None = None, quiet: bool = True) -> Run",
    "sweep": "(scenario: Scenario | dict[str, Any] | str | Path, grid: Mapping[str, Sequence[Any]] | None = None, *, "
             "seeds: Sequence[int] | None = None, out: str | Path | None = None, overwrite: bool = False, "
             "jobs: int = 1, quiet: bool = True) -> Sweep",
    "table": "(runs: Sequence[Run], fmt: str = md) -> str",
}
# The error family (docs/api.md, "Errors"): each public error's bases, in order.
ERRORS = {
    "FedgcError": ("Exception",),
    "ScenarioError": ("FedgcError", "ValueError"),
    "PluginError": ("ScenarioError",),
    "RunFolderError": ("FedgcError", "ValueError"),
}
# Every public class's members (public_members): a change to any is a deliberate edit here and in
# docs/api.md together.
MEMBERS = {
    "AcceptedUpdate": {
        "dense": "method (self, name: str, device: torch.device | None = None) -> torch.Tensor",
        "node": "field int",
        "payloads": "field dict[str, Payload]",
        "scale": "field float",
        "share": "field float",
    },
    "Aggregator": {
        "Options": "class NoOptions",
        "aggregate": "method (self, updates: list[AcceptedUpdate], shapes: dict[str, tuple[int, ...]], "
            "device: torch.device) -> dict[str, torch.Tensor]",
        "from_strategy": "classmethod (strategy: AggregationSettings) -> Aggregator",
        "weighted": "attribute = True",
    },
    "ClientRecord": {
        "attempt": "field int",
        "bytes_down": "field int | None = None",
        "bytes_up": "field int | None = None",
        "capped": "field bool = False",
        "clipped": "field bool = False",
        "compute_s": "field float | None = None",
        "download_s": "field float | None = None",
        "node": "field int",
        "norm_after_clip": "field float | None = None",
        "norm_before_clip": "field float | None = None",
        "outcome": "field str",
        "phase": "field str | None = None",
        "reason": "field str | None = None",
        "round": "field int",
        "upload_s": "field float | None = None",
    },
    "Comparison": {
        "out_dir": "field Path | None = None",
        "reading": "method (self) -> str",
        "runs": "field list[Run]",
        "table": "method (self) -> str",
    },
    "CompressionContext": {
        "density": "field float = 1.0",
        "generator": "field torch.Generator | None = None",
        "memory": "field Memory | None = None",
        "num_clients": "field int = 1",
        "round": "field int = 1",
    },
    "Compressor": {
        "Options": "class CompressorOptions",
        "compress": "method (self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> Payload",
        "decompress": "method (self, payload: Payload) -> torch.Tensor",
        "from_config": "classmethod (options: CompressorOptions) -> Compressor",
        "make_memory": "classmethod (options: CompressorOptions) -> Memory",
        "prepare_update": "method (self, update: dict[str, torch.Tensor], ctx: CompressionContext) -> dict[str, "
            "torch.Tensor]",
        "reads_density": "attribute = False",
        "reads_error_feedback": "attribute = True",
        "sparse_values": "attribute = False",
    },
    "CompressorOptions": {
        "dense_small_tensors": "field bool = True",
        "error_feedback": "field bool = True",
        "value_dtype": "field Literal[fp32, fp16, int8, int4, sign] = 'fp32'",
    },
    "DensePayload": {
        "shape": "field tuple[int, ...]",
        "to_dense": "method (self) -> torch.Tensor",
        "values": "field torch.Tensor",
    },
    "LowRankPayload": {
        "p": "field torch.Tensor",
        "q": "field torch.Tensor",
        "shape": "field tuple[int, ...]",
        "to_dense": "method (self) -> torch.Tensor",
    },
    "QuantizedPayload": {
        "bucket_size": "field int",
        "codes": "field torch.Tensor",
        "levels": "field int",
        "norms": "field torch.Tensor",
        "shape": "field tuple[int, ...]",
        "to_dense": "method (self) -> torch.Tensor",
        "width": "property",
    },
    "RoundObserver": {
        "aborted": "method (self) -> None",
        "finished": "method (self, summary: Summary, rows: list[RoundRecord], weights: dict[str, "
            "torch.Tensor]) -> None",
        "note": "method (self, line: str) -> None",
        "round_done": "method (self, record: RoundRecord, clients: list[ClientRecord]) -> None",
        "started": "method (self, done: list[RoundRecord]) -> None",
        "stopping": "method (self) -> None",
    },
    "RoundRecord": {
        "accuracy": "field float | None = None",
        "achieved_density": "field float | None = None",
        "applied": "field int = 0",
        "applied_nodes": "field list[int] = <factory>",
        "attempt": "field int = 0",
        "bytes_down": "field int = 0",
        "bytes_up": "field int = 0",
        "capped_nodes": "field list[int] = <factory>",
        "client_upload_bytes": "field list[int] = <factory>",
        "client_upload_s": "field list[float] = <factory>",
        "clipped_nodes": "field list[int] = <factory>",
        "completed": "field int = 0",
        "cut": "field int = 0",
        "dense_bytes_up": "field int = 0",
        "density": "field float | None = None",
        "discarded": "field int = 0",
        "downlink_density": "field float | None = None",
        "downlink_resets": "field int = 0",
        "failed": "field int = 0",
        "late": "field int = 0",
        "locally_clipped": "field int | None = None",
        "loss": "field float | None = None",
        "max_upload_s": "field float | None = None",
        "mean_compute_s": "field float | None = None",
        "mean_download_s": "field float | None = None",
        "mean_upload_s": "field float | None = None",
        "norm_after_clip_median": "field float | None = None",
        "norm_before_clip_max": "field float | None = None",
        "norm_before_clip_median": "field float | None = None",
        "rejected": "field int = 0",
        "rejected_reasons": "field dict[str, int] = <factory>",
        "round": "field int",
        "round_duration_s": "field float = 0.0",
        "selected": "field int = 0",
        "sim_end_s": "field float = 0.0",
        "sim_start_s": "field float = 0.0",
        "skipped": "field bool = False",
        "train_loss": "field float | None = None",
    },
    "Run": {
        "clients": "field list[ClientRecord]",
        "label": "field str = ''",
        "model": "property",
        "out_dir": "field Path | None = None",
        "rounds": "field list[RoundRecord]",
        "scenario": "field Scenario",
        "summary": "field Summary",
        "to_pandas": "method (self, table: str = rounds) -> Any",
        "weights": "field dict[str, torch.Tensor]",
    },
    "Scenario": {
        "build": "classmethod (**keys: Any) -> Scenario",
        "checkpoint_every": "field int = 10",
        "client": "field ClientConfig = <factory>",
        "client_state": "field ClientStateConfig = <factory>",
        "compression": "field CompressionConfig = <factory>",
        "data": "field DataConfig = <factory>",
        "deterministic": "field bool = False",
        "device": "field str = 'auto'",
        "downlink": "field DownlinkConfig = <factory>",
        "engine": "field Literal[inline, flower] = 'inline'",
        "eval": "field EvalConfig = <factory>",
        "from_dict": "classmethod (tree: Mapping[str, Any]) -> Scenario",
        "from_yaml": "classmethod (path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario",
        "model": "field ModelConfig = <factory>",
        "name": "field str",
        "network": "field NetworkConfig = <factory>",
        "ray": "field RayConfig = <factory>",
        "rounds": "field int",
        "seed": "field int = 0",
        "strategy": "field StrategyConfig = <factory>",
        "to_yaml": "method (self) -> str",
        "unchecked_plugins": "property",
        "with_overrides": "method (self, overrides: Mapping[str, Any]) -> Scenario",
    },
    "ServerOptimizer": {
        "Options": "class NoOptions",
        "direction": "method (self, name: str, delta: torch.Tensor) -> torch.Tensor",
        "from_strategy": "classmethod (strategy: StrategySettings) -> ServerOptimizer",
        "load_state_dict": "method (self, state: dict[str, Any]) -> None",
        "state_dict": "method (self) -> dict[str, Any]",
        "step": "method (self, weights: dict[str, torch.Tensor], delta: dict[str, torch.Tensor]) -> dict[str, "
            "torch.Tensor]",
    },
    "SignPayload": {
        "neg_scale": "field float",
        "pos_scale": "field float",
        "shape": "field tuple[int, ...]",
        "signs": "field torch.Tensor",
        "to_dense": "method (self) -> torch.Tensor",
    },
    "SparsePayload": {
        "indices": "field torch.Tensor",
        "numel": "property",
        "shape": "field tuple[int, ...]",
        "to_dense": "method (self) -> torch.Tensor",
        "values": "field torch.Tensor",
    },
    "Summary": {
        "best_accuracy": "field float | None",
        "bytes_down": "field int",
        "bytes_up": "field int",
        "clients_completed": "field int",
        "clients_discarded": "field int = 0",
        "clients_dropped": "field int",
        "clients_failed": "field int",
        "cpu_kernels": "field str | None = None",
        "compression_ratio_up": "field float | None",
        "dense_bytes_up": "field int",
        "final_accuracy": "field float | None",
        "name": "field str",
        "rounds": "field int",
        "rounds_skipped": "field int = 0",
        "rounds_to_target": "field int | None",
        "sim_time_s": "field float",
        "stopped_reason": "field str = 'completed'",
        "target_accuracy": "field float",
        "time_to_target_s": "field float | None",
        "updates_applied": "field int",
        "updates_rejected": "field int",
        "wall_time_s": "field float",
    },
    "Sweep": {
        "out_dir": "field Path | None = None",
        "runs": "field list[Run]",
        "table": "method (self, fmt: str = md) -> str",
        "to_pandas": "method (self) -> Any",
    },
    "TernaryPayload": {
        "scale": "field float",
        "shape": "field tuple[int, ...]",
        "to_dense": "method (self) -> torch.Tensor",
        "trits": "field torch.Tensor",
    },
    "UserData": {
        "central": "method (self, name: str) -> CentralDataset",
        "from_npz": "classmethod (path: str | Path, num_classes: int | None = None) -> UserData",
        "from_torch": "classmethod (train: Any, test: Any, num_classes: int | None = None) -> UserData",
        "groups": "field np.ndarray | None = None",
        "num_classes": "field int | None = None",
        "x_test": "field np.ndarray",
        "x_train": "field np.ndarray",
        "y_test": "field np.ndarray",
        "y_train": "field np.ndarray",
    },
}


def test_the_public_names_and_signatures_are_the_promised_ones():
    """Every name of ``fedgc.__all__``, its signature, its docstring; every public class's members
    (fields, methods and their signatures, class attributes and their values); every error's bases. The
    failure lists each difference, named: ``fedgc.Compressor.compress changed: was ..., now ...``."""
    assert sorted(fedgc.__all__) == sorted(PUBLIC), changes(dict.fromkeys(PUBLIC, "a public name"),
                                                            dict.fromkeys(fedgc.__all__, "a public name"), "")
    found = []
    for name, signature in PUBLIC.items():
        value = getattr(fedgc, name)
        assert inspect.getdoc(value), f"fedgc.{name} has no docstring"
        if signature is not None:
            found += changes({name: signature}, {name: signature_of(value)}, "")
    pinned_classes = {name for name in PUBLIC if isinstance(getattr(fedgc, name), type)
                      and not issubclass(getattr(fedgc, name), BaseException)}
    assert pinned_classes == set(MEMBERS), f"classes whose members are pinned: {sorted(pinned_classes ^ set(MEMBERS))}"
    for name, members in MEMBERS.items():
        found += changes(members, public_members(getattr(fedgc, name)), f"{name}.")
    for name, bases in ERRORS.items():
        now = tuple(base.__name__ for base in getattr(fedgc, name).__bases__)
        found += changes({"__bases__": str(bases)}, {"__bases__": str(now)}, f"{name}.")
    assert not found, "the public API changed (docs/api.md and this file's pins change together):\n" + \
        "\n".join(found)
    for name in ("from_yaml", "from_dict", "build", "with_overrides", "to_yaml"):
        assert inspect.getdoc(getattr(fedgc.Scenario, name)), f"fedgc.Scenario.{name} has no docstring"
    with pytest.raises(AttributeError):
        fedgc.run_point  # noqa: B018 — internals are not reached through the package


def test_a_changed_member_is_named_in_the_failure():
    """The pins' comparison names what changed: a method added, a method whose signature changed, a
    class attribute whose value changed (the checker itself, on a subclass that changes
    ``fedgc.Compressor`` so)."""

    class Changed(fedgc.Compressor):
        reads_density = True

        def compress(self, tensor, name, ctx=None):
            return None

        def extra(self) -> int:
            return 0

    assert changes(MEMBERS["Compressor"], public_members(Changed), "Compressor.") == [
        "fedgc.Compressor.extra added: method (self) -> int",
        "fedgc.Compressor.compress changed: was method (self, tensor: torch.Tensor, name: str, "
        "ctx: CompressionContext) -> Payload, now method (self, tensor, name, ctx=None)",
        "fedgc.Compressor.reads_density changed: was attribute = False, now attribute = True",
    ]
    assert changes({"a": "field int"}, {"b": "field int"}, "X.") == ["fedgc.X.a removed (was field int)",
                                                                     "fedgc.X.b added: field int"]


def test_the_version_is_the_one_in_pyproject_toml():
    """``fedgc.__version__`` is read from the installed package's metadata, which pyproject.toml sets: one
    source. (It is a module attribute, not one of the names ``from fedgc import *`` brings.)"""
    assert fedgc.__version__ == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert "__version__" not in fedgc.__all__ and "__version__" in dir(fedgc)


def test_import_fedgc_is_light():
    """``import fedgc`` loads neither torch nor Flower: the names load on first use."""
    code = "import sys, fedgc; print(sorted(m for m in ('torch', 'flwr', 'fedgc.scenario.model') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_scenarios_from_a_file_a_dict_keywords_and_overrides():
    quick = fedgc.Scenario.from_yaml(REPO / "scenarios" / "quickstart.yaml", {"rounds": 3})
    assert quick.rounds == 3 and quick.name == "quickstart"
    tiny = fedgc.Scenario.from_dict(TINY)
    assert fedgc.Scenario.build(**TINY) == tiny
    denser = tiny.with_overrides({"compression.density": 0.5, "seed": 4})
    assert (denser.compression.density, denser.seed, tiny.compression.density) == (0.5, 4, 0.1)
    assert fedgc.Scenario.from_dict(json.loads(json.dumps(tiny.model_dump(mode="json")))) == tiny
    assert "name: api-tiny" in tiny.to_yaml()


@pytest.mark.parametrize("bad, message", [
    ({"compression.densty": 0.1}, "compression.densty: unknown key (did you mean `density`?)"),
    ({"rounds": 0}, "rounds: "),
    ({"a.b.c.d.e.f.g.h.i": 1}, "a.b.c.d.e.f.g.h.i"),
])
def test_bad_input_is_one_line_of_scenario_error(bad, message):
    with pytest.raises(fedgc.ScenarioError) as err:
        fedgc.Scenario.from_dict(TINY).with_overrides(bad)
    assert message in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(fedgc.ScenarioError):
        fedgc.run({"name": "x"})  # rounds missing


def test_a_run_in_memory_is_the_command_lines_run(tmp_path):
    seen: list[fedgc.RoundRecord] = []
    memory = fedgc.run(TINY, on_round=seen.append)
    assert memory.out_dir is None and [r.round for r in seen] == [1, 2] and seen == memory.rounds
    (tmp_path / "tiny.yaml").write_text(fedgc.Scenario.from_dict(TINY).to_yaml())
    cli = subprocess.run([sys.executable, "-m", "fedgc", "run", str(tmp_path / "tiny.yaml"), "--out",
                          str(tmp_path / "cli"), "--quiet"], check=False, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    folder = fedgc.load_run(tmp_path / "cli")
    assert [asdict(r) for r in folder.rounds] == [asdict(r) for r in memory.rounds]  # wall-clock-free rows
    assert folder.clients == memory.clients and len(memory.clients) == 2 * 2
    assert {k: v for k, v in asdict(folder.summary).items() if k != "wall_time_s"} == \
           {k: v for k, v in asdict(memory.summary).items() if k != "wall_time_s"}
    model = memory.model
    assert all((model.state_dict()[k] == v).all() for k, v in folder.weights.items())
    frame = memory.to_pandas()
    assert list(frame["round"]) == [1, 2] and "bytes_up" in frame
    assert set(memory.to_pandas("clients")["outcome"]) <= {"applied", "skipped", "failed", "late", "cut"}


def test_a_run_folder_from_python_is_refused_when_it_holds_a_run(tmp_path):
    first = fedgc.run(TINY, out=tmp_path / "run")
    assert first.out_dir == tmp_path / "run" and (tmp_path / "run" / "summary.json").is_file()
    with pytest.raises(ValueError, match="holds"):
        fedgc.run(TINY, out=tmp_path / "run")
    again = fedgc.run(TINY, out=tmp_path / "run", overwrite=True)
    assert again.rounds == first.rounds


def test_a_sweep_over_two_seeds_gives_its_table_in_memory_and_on_disk(tmp_path):
    swept = fedgc.sweep(TINY, {"compression.density": [0.1, 0.5]}, seeds=[0, 1], out=tmp_path / "sweep")
    assert len(swept.runs) == 4 and [r.scenario.seed for r in swept.runs] == [0, 1, 0, 1]
    text = swept.table()
    assert text.count("\n| ") >= 2 and "±" in text and "n" in text.splitlines()[0]
    back = fedgc.load_sweep(tmp_path / "sweep")
    assert back.table() == text
    assert fedgc.report([tmp_path / "sweep"]) == text
    written = fedgc.plot(swept.runs, tmp_path / "plots")
    assert written and all(p.is_file() for p in written)
    memory = fedgc.sweep(TINY, seeds=[0, 1])
    assert memory.out_dir is None and all(r.out_dir is None for r in memory.runs)
    assert [r.label for r in memory.runs] == ["seed=0", "seed=1"]  # the point's name, kept in memory
    assert [r.rounds for r in memory.runs] == [r.rounds for r in swept.runs[:2]]


def test_a_sweep_kept_in_memory_names_its_rows_by_the_swept_values_as_on_disk(tmp_path):
    """The README's example: rows named ``compression.density=0.1``, not the scenario's name twice."""
    grid = {"compression.density": [0.1, 0.5]}
    in_memory = fedgc.sweep(TINY, grid).table()
    names = [line.split(" | ")[0].lstrip("| ") for line in in_memory.splitlines()[2:4]]
    assert names == ["compression.density=0.1", "compression.density=0.5"]
    assert in_memory == fedgc.sweep(TINY, grid, out=tmp_path / "sweep").table()  # what a sweep folder shows
    seeds = fedgc.sweep(TINY, grid, seeds=[0, 1]).table()  # seeds averaged: one row per swept value
    assert [line.split(" | ")[0].lstrip("| ") for line in seeds.splitlines()[2:4]] == names


def test_load_run_of_a_folder_that_is_not_a_run_is_one_line(tmp_path):
    with pytest.raises(ValueError) as err:
        fedgc.load_run(tmp_path)
    assert "not a run folder" in str(err.value) and "\n" not in str(err.value)


def test_progress_in_a_notebook_is_a_tqdm_bar(monkeypatch, capsys):
    """``quiet=False`` in a Jupyter kernel (stderr not a terminal) shows a ``tqdm.auto`` bar, not the
    terminal's redrawn line; ``quiet=True`` shows nothing."""
    import types

    from fedgc.core.observe import NotebookProgress, ProgressObserver, default_observers

    assert [type(o) for o in default_observers(3, None, quiet=False, title="t", target_accuracy=0.9)] == \
        [ProgressObserver]  # IPython or ipykernel merely imported (pytest ran the notebooks) is no notebook
    shell = type("ZMQInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    shown = default_observers(3, None, quiet=False, title="t", target_accuracy=0.9)
    assert [type(o) for o in shown] == [ProgressObserver, NotebookProgress] and not shown[0].enabled
    assert [type(o) for o in default_observers(3, None, quiet=True, title="t", target_accuracy=0.9)] == [ProgressObserver]
    fedgc.run(TINY, quiet=False)
    assert "2/2" in capsys.readouterr().err  # the bar reached the last round
