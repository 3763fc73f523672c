"""A researcher's own models, datasets, compressors, aggregation rules and server optimizers, without
editing fedgc (docs/api.md, "Extending").

Three ways in, one registry per kind (the same dicts the built-ins are listed in):

- from Python: ``fedgc.register_model("tiny", TinyNet)``, ``register_dataset``, ``register_compressor``, ``register_aggregator``,
  ``register_server_optimizer``;
- an import path in the scenario: ``model: {name: "my_pkg.models:TinyNet"}`` (also ``data.dataset``,
  ``compression.name``, ``downlink.name``, ``strategy.aggregation`` and ``strategy.server_optimizer``),
  imported when the scenario is validated and registered under that text;
- an installed package that announces itself in the ``fedgc.plugins`` entry-point group: the entry
  point is a function of no arguments that calls the ``register_*`` functions.

Imports are the process's own decision, never a message's. A process imports a scenario's import path
only when ``imports_allowed`` says so: always in the process that reads the user's scenario (the CLI,
the API, Flower's simulation runtime started by fedgc), and on a deployed SuperNode only for modules its
operator listed (node config ``plugins="my_pkg,other_pkg"``, ``node_policy``), whether a message or the
run config's scenario names it; so is a ``fedgc.plugins`` entry point. A name a node does not know is
refused in the reply (``unknown-model``, ``bad-run-config``...), never imported."""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.metadata
import reprlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from fedgc.plugins.import_paths import PluginError, import_object, imports_allowed, is_import_path
from fedgc.plugins.options import NoOptions

if TYPE_CHECKING:  # types only (_add_compressor imports fedgc.compress.registry, which imports it, when it runs)
    from fedgc.compress.base import Compressor

ENTRY_POINT_GROUP = "fedgc.plugins"
KINDS = ("model", "dataset", "compressor", "aggregator", "server_optimizer")


@dataclass(frozen=True)
class PluginInfo:
    """One registered name: its kind, where it came from (``built-in``, ``python``, ``import path``,
    ``plugin <distribution>``) and the object's qualified name."""

    kind: str
    name: str
    source: str
    target: str


_SOURCES: dict[tuple[str, str], str] = {}


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


# --- models ----------------------------------------------------------------------------------------

def register_model(name: str, builder: Callable[..., Any], options: type[BaseModel] | None = None, *,
                   replace: bool = False) -> None:
    """Make ``model.name: <name>`` build ``builder(input_shape, num_classes, **options) -> nn.Module``.
    ``options``: a pydantic model of its settings (``model.options``; unknown keys are errors); None:
    the builder's own ``Options`` if it is a class with one, else no options. ``replace=True`` registers
    again a name this process registered from Python (a notebook cell run twice)."""
    _add_model(name, builder, options, "python", replace)


def _add_model(name: str, builder: Callable[..., Any], options: type[BaseModel] | None, source: str,
               replace: bool = False) -> None:
    from fedgc.models import MODELS

    _check_name(name, "model", MODELS, replace, source)
    if not callable(builder):
        raise PluginError(f"model {name}: {builder!r} is not callable (a model is a class or function "
                          "(input_shape, num_classes, **options) -> torch.nn.Module)")
    declared = options if options is not None else getattr(builder, "Options", None)
    if declared is None:
        declared = NoOptions
    if not (isinstance(declared, type) and issubclass(declared, BaseModel)):
        raise PluginError(f"model {name}: its options must be a pydantic BaseModel subclass, not {declared!r}")
    MODELS[name] = _checked_builder(name, builder, declared, options)
    _SOURCES[("model", name)] = source


def _checked_builder(name: str, builder: Callable[..., Any], declared: type[BaseModel],
                     given: type[BaseModel] | None) -> Any:
    """The builder as the model registry holds models: a callable with an ``Options`` model, whose result
    is checked to be a ``torch.nn.Module`` each time it builds (a ``PluginError`` naming the model
    otherwise, not an ``AttributeError`` from inside fedgc). ``__wrapped__`` and ``registered_options``
    keep what was registered (a sweep's workers register the same again: ``carried_plugins``)."""

    def build(input_shape: tuple[int, ...], num_classes: int, **kwargs: Any) -> Any:
        from torch import nn

        model = builder(input_shape, num_classes, **kwargs)
        if not isinstance(model, nn.Module):
            raise PluginError(f"model {name!r}: its builder {getattr(builder, '__qualname__', builder)!s:.80} "
                              f"returned {type(model).__name__}, not a torch.nn.Module")
        return model

    build.Options = declared  # type: ignore[attr-defined]
    build.registered_options = given  # type: ignore[attr-defined]
    build.__wrapped__ = builder  # type: ignore[attr-defined]
    build.__qualname__ = getattr(builder, "__qualname__", "model")
    build.__module__ = getattr(builder, "__module__", __name__)
    return build


# --- datasets --------------------------------------------------------------------------------------

def register_dataset(name: str, data: Any, *, replace: bool = False) -> None:
    """Make ``data.dataset: <name>`` use ``data``: a ``fedgc.UserData`` (arrays, ``UserData.from_npz``,
    ``UserData.from_torch``) or a function of no arguments returning one (called when a run loads it). ``replace=True`` registers
    again a name this process registered from Python (a notebook cell run twice)."""
    _add_dataset(name, data, "python", replace)


def _add_dataset(name: str, data: Any, source: str, replace: bool = False) -> None:
    from fedgc.data.config import DATASET_NAMES
    from fedgc.data.user import USER_DATASETS, UserData

    _check_name(name, "dataset", {**dict.fromkeys(DATASET_NAMES), **USER_DATASETS}, replace, source)
    if not (isinstance(data, UserData) or callable(data)):
        raise PluginError(f"dataset {name}: expected a fedgc.UserData or a function returning one, "
                          f"not {type(data).__name__}")
    USER_DATASETS[name] = data
    _SOURCES[("dataset", name)] = source


# --- compressors -----------------------------------------------------------------------------------

def register_compressor(cls: type, name: str | None = None, *, replace: bool = False) -> None:
    """Make ``compression.name: <cls.name>`` (or ``name``) use ``cls``: a ``fedgc.Compressor`` subclass
    whose ``compress`` returns one of the existing payload kinds, with an ``Options`` model derived from
    ``fedgc.CompressorOptions`` for its keys (docs/api.md). ``replace=True`` registers
    again a name this process registered from Python (a notebook cell run twice)."""
    _add_compressor(cls, name, "python", replace)


def _add_compressor(cls: type[Compressor], name: str | None, source: str, replace: bool = False) -> None:
    from fedgc.compress.registry import COMPRESSORS, check_compressor

    label = f"compressor {name or getattr(cls, 'name', cls)!r}"
    try:
        check_compressor(cls)
    except TypeError as err:
        raise PluginError(f"{label}: {err}") from None
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:  # every client would fail to make it, and the run apply nothing
        raise PluginError(f"{label}: {cls.__name__} does not implement {', '.join(missing)} "
                          "(a fedgc.Compressor's compress(tensor, name, ctx) returns a payload; docs/api.md)")
    extra = cls.Options.model_config.get("extra")
    if extra not in (None, "forbid"):  # a typo in the compression section would run with the default
        raise PluginError(f"{label}: {cls.__name__}.Options sets extra={extra!r}; a compressor's options refuse "
                          "unknown keys (remove it: fedgc.CompressorOptions forbids them)")
    key = name or cls.name
    _check_name(key, "compressor", COMPRESSORS, replace, source)
    COMPRESSORS[key] = cls
    _SOURCES[("compressor", key)] = source


# --- aggregation rules ----------------------------------------------------------------------------

def register_aggregator(cls: type, name: str | None = None, *, replace: bool = False) -> None:
    """Make ``strategy.aggregation: <cls.name>`` (or ``name``) use ``cls``: a ``fedgc.Aggregator``
    subclass (server side only: clients never see it). ``replace=True`` registers
    again a name this process registered from Python (a notebook cell run twice)."""
    _add_server_part("aggregator", cls, name, "python", replace)


def _add_server_part(kind: str, cls: type, name: str | None, source: str, replace: bool = False) -> None:
    """Register an aggregation rule (``kind`` aggregator) or a server optimizer (server_optimizer)."""
    registry: dict[str, type[Any]]  # one of the two registries below (their classes differ)
    if kind == "aggregator":
        from fedgc.aggregation.aggregators import AGGREGATORS as registry
        from fedgc.aggregation.aggregators import check_aggregator as check
    else:
        from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS as registry
        from fedgc.aggregation.server_optim import check_server_optimizer as check
    label = kind.replace("_", " ")
    try:
        check(cls)
    except TypeError as err:
        raise PluginError(f"{label} {name or getattr(cls, 'name', cls)!r}: {err}") from None
    options = getattr(cls, "Options", None)
    if not (isinstance(options, type) and issubclass(options, BaseModel)):
        raise PluginError(f"{label} {name or getattr(cls, 'name', cls)!r}: {cls.__name__}.Options must be a "
                          f"pydantic BaseModel subclass, not {options!r:.80}")
    key = name or getattr(cls, "name", None)
    if not isinstance(key, str):
        scenario_key = "aggregation" if kind == "aggregator" else kind
        raise PluginError(f"{label} {cls.__name__}: set its name (the scenario's strategy.{scenario_key})")
    _check_name(key, kind, registry, replace, source)
    registry[key] = cls
    _SOURCES[(kind, key)] = source


# --- server optimizers ----------------------------------------------------------------------------

def register_server_optimizer(cls: type, name: str | None = None, *, replace: bool = False) -> None:
    """Make ``strategy.server_optimizer: <cls.name>`` (or ``name``) use ``cls``: a
    ``fedgc.ServerOptimizer`` subclass (server side only). ``replace=True`` registers
    again a name this process registered from Python (a notebook cell run twice)."""
    _add_server_part("server_optimizer", cls, name, "python", replace)


def _check_name(name: str, kind: str, known: Any, replace: bool = False, source: str = "python") -> None:
    """A new, short, printable name; with ``replace``, a name this process registered from Python may
    be registered again (a notebook cell run twice); a built-in, an import path or a plugin never. A
    ``:`` is an import path's (``module:attribute``) or the Hub's (``hf:<id>``): only an import path is
    registered under such a name, by the text that names it."""
    if not isinstance(name, str) or not name or len(name) > 200 or not name.isprintable():
        raise PluginError(f"{kind} name {reprlib.repr(name)}: expected a short printable name")
    if source != "import path" and ":" in name:
        raise PluginError(f"{kind} name {name!r}: a ':' marks an import path (module:attribute) or a Hub data set "
                          "(hf:<id>), which a scenario resolves as such; register it under a name without one")
    if not isinstance(replace, bool):
        raise PluginError(f"{kind} {name!r}: replace must be True or False, not {reprlib.repr(replace)}")
    if name in known:
        where = _SOURCES.get((kind, name), "built-in")
        if replace and where == "python":
            return
        hint = "; choose another name" + ("" if where != "python" else " (or replace=True)")
        raise PluginError(f"{kind} {name!r} is registered already ({where}){hint}")


# --- import paths in a scenario ----------------------------------------------------------------------



def resolve(kind: str, path: str) -> None:
    """Register the object an import path names under that path (once; the same path again is a no-op)."""
    if (kind, path) in _SOURCES:
        return
    value = import_object(path, kind)
    if kind == "compressor":
        _add_compressor(value, path, "import path")
    elif kind in ("aggregator", "server_optimizer"):
        _add_server_part(kind, value, path, "import path")
    elif kind == "model":
        _add_model(path, value, None, "import path")
    else:
        _add_dataset(path, value, "import path")


# Where a scenario names a plugin: (section, key, kind).
PLUGIN_KEYS = (("model", "name", "model"), ("data", "dataset", "dataset"), ("compression", "name", "compressor"),
               ("downlink", "name", "compressor"), ("strategy", "aggregation", "aggregator"),
               ("strategy", "server_optimizer", "server_optimizer"))


def _named(tree: Any, section: str, key: str) -> Any:
    return tree.get(section, {}).get(key) if isinstance(tree, dict) and isinstance(tree.get(section), dict) else None


def resolve_scenario_paths(tree: Any) -> None:
    """Import and register every import path a scenario tree names (model, dataset, compressors)."""
    if not isinstance(tree, dict):
        return
    load_entry_points()
    for section, key, kind in PLUGIN_KEYS:
        value = _named(tree, section, key)
        if isinstance(value, str) and is_import_path(value):
            resolve(kind, value)


def is_known(kind: str, name: str) -> bool:
    """Whether ``name`` is registered for ``kind`` in this process (a built-in, or registered already)."""
    from fedgc.aggregation.aggregators import AGGREGATORS
    from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS
    from fedgc.compress.registry import COMPRESSORS
    from fedgc.data.config import DATASET_NAMES
    from fedgc.data.hf import PREFIX as HF_PREFIX
    from fedgc.data.user import USER_DATASETS
    from fedgc.models import MODELS

    if kind == "dataset":
        return name in DATASET_NAMES or name in USER_DATASETS or name.startswith(HF_PREFIX)
    # cast: the registries' classes differ, so mypy joins them to object
    table = cast(dict[str, Any], {"model": MODELS, "compressor": COMPRESSORS, "aggregator": AGGREGATORS,
                                  "server_optimizer": SERVER_OPTIMIZERS}[kind])
    return name in table


def is_built_in(kind: str, name: str) -> bool:
    """Whether ``name`` is one of fedgc's own (not registered from Python, an import path or a plugin)."""
    return (kind, name) not in _SOURCES and is_known(kind, name)


def _entry_points_pending() -> bool:
    """Installed plugins (``fedgc.plugins`` entry points) not called yet in this process: their names are
    not known until they run. Reads the packages' metadata only."""
    return not _entry_points_loaded and bool(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


# Set while a run folder's records are read (``reading_records``): a name no registry of this process
# holds is a plugin the run's own process registered (from Python, say), not an error.
_reading_records: contextvars.ContextVar[bool] = contextvars.ContextVar("fedgc_reading_records", default=False)


@contextlib.contextmanager
def reading_records() -> Iterator[None]:
    """Within it, ``unchecked_plugins`` reads every name no registry of this process holds as a plugin
    registered elsewhere (``fedgc.load_run``: a run made with ``fedgc.register_model`` in another
    process is data here: its tables, curves and summary; what needs the plugin says so)."""
    token = _reading_records.set(True)
    try:
        yield
    finally:
        _reading_records.reset(token)


def reading_records_now() -> bool:
    """Whether this is within ``reading_records`` (a run folder's records being read)."""
    return _reading_records.get()


def unchecked_plugins(tree: Any) -> dict[tuple[str, str], str]:
    """``{(section, key): name}`` of the plugins a scenario tree names that this process has not loaded:
    an import path not imported yet, or (while installed plugins were not called, or within
    ``reading_records``) a name none of the registries holds. Validating them would run their code;
    nothing is imported or called here."""
    found: dict[tuple[str, str], str] = {}
    pending: bool | None = None
    for section, key, kind in PLUGIN_KEYS:
        value = _named(tree, section, key)
        if not isinstance(value, str) or is_known(kind, value):
            continue
        if is_import_path(value):
            found[(section, key)] = value
        elif value and value.isprintable() and len(value) <= 200:
            pending = (_reading_records.get() or _entry_points_pending()) if pending is None else pending
            if pending:
                found[(section, key)] = value
    return found


def missing_plugins(unchecked: tuple[str, ...]) -> list[str]:
    """Of a scenario's ``unchecked_plugins`` (``kind name``), those this process cannot load: a name no
    registry holds that is no import path (registered from Python in the process that made the run)."""
    missing = []
    for entry in unchecked:
        kind, _, name = entry.partition(" ")
        if kind in KINDS and not is_import_path(name) and not is_known(kind, name):
            missing.append(entry)
    return missing


@contextlib.contextmanager
def running(kind: str, name: str) -> Iterator[None]:
    """Within it, the plugin registered as ``name`` runs (a dataset's function, a model's builder): what it
    raises, ``SystemExit`` included, is one ``PluginError`` line naming it; fedgc's own errors pass as
    they are. A built-in runs as it is."""
    if _SOURCES.get((kind, name)) is None:
        yield
        return
    try:
        yield
    except (Exception, SystemExit) as err:  # the plugin's error (or exit), in one line
        if type(err).__module__.split(".")[0] == "fedgc":
            raise
        text = f"{kind} {name!r} raised {type(err).__name__}: {err}".splitlines()[0]
        raise PluginError(text[:300]) from None


def registered_in_python(tree: dict[str, Any]) -> list[str]:
    """The names a scenario uses that were registered from Python in this process only: other processes
    (Flower's runtime, SuperNodes) cannot know them."""
    used = [("model", tree.get("model", {}).get("name")), ("dataset", tree.get("data", {}).get("dataset")),
            ("compressor", tree.get("compression", {}).get("name")), ("compressor", tree.get("downlink", {}).get("name")),
            ("aggregator", tree.get("strategy", {}).get("aggregation")),
            ("server_optimizer", tree.get("strategy", {}).get("server_optimizer"))]
    return [f"{kind} {name}" for kind, name in used if _SOURCES.get((kind, name)) == "python"]


# --- installed plugins ---------------------------------------------------------------------------

_entry_points_loaded = False  # every entry point installed has been called in this process
_entry_points_called: set[tuple[str, str]] = set()  # (name, value) of those called


def load_entry_points() -> list[str]:
    """Call every ``fedgc.plugins`` entry point once per process; returns their names. A plugin that
    fails to load is a ``PluginError`` naming it. Under a node's policy (``node_policy``) an entry
    point whose module its operator did not list is neither imported nor called (a later call outside
    the policy may still load it)."""
    global _entry_points_loaded  # noqa: PLW0603 — once per process, by design
    if _entry_points_loaded:
        return []
    names, skipped = [], False
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if (entry.name, entry.value) in _entry_points_called:
            continue
        if not imports_allowed(entry.value.partition(":")[0].strip()):  # its module, as listed
            skipped = True
            continue
        _entry_points_called.add((entry.name, entry.value))
        distribution = entry.dist.name if entry.dist is not None else entry.value
        before = set(_SOURCES)
        try:
            entry.load()()
        except PluginError:
            raise
        except (Exception, SystemExit) as err:  # noqa: BLE001 — the plugin's error (or exit), in one line
            raise PluginError(f"plugin {entry.name} ({distribution}): {type(err).__name__}: {err}"
                              .splitlines()[0]) from None
        for key in set(_SOURCES) - before:
            _SOURCES[key] = f"plugin {distribution}"
        names.append(entry.name)
    _entry_points_loaded = not skipped
    return names


def registered() -> list[PluginInfo]:
    """Everything registered: built-in and added, each with where it came from."""
    from fedgc.aggregation.aggregators import AGGREGATORS
    from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS
    from fedgc.compress.registry import COMPRESSORS
    from fedgc.data.config import DATASET_NAMES
    from fedgc.data.user import USER_DATASETS
    from fedgc.models import MODELS

    load_entry_points()
    rows = []
    for kind, table in (("model", MODELS), ("dataset", {**dict.fromkeys(DATASET_NAMES), **USER_DATASETS}),
                        ("compressor", COMPRESSORS), ("aggregator", AGGREGATORS),
                        ("server_optimizer", SERVER_OPTIMIZERS)):
        for name, value in table.items():
            target = _qualname(value) if value is not None else "fedgc.data"
            rows.append(PluginInfo(kind, name, _SOURCES.get((kind, name), "built-in"), target))
    return rows


def main(argv: list[str] | None = None) -> int:
    """``fedgc plugins``: every model, dataset, compressor and aggregation rule fedgc knows, and where
    each came from."""
    try:
        rows = registered()
    except PluginError as err:
        print(f"error: {err}", file=__import__("sys").stderr)
        return 2
    width = max(len(r.name) for r in rows)
    for row in rows:
        print(f"{row.kind:<16} {row.name:<{width}}  {row.source:<12} {row.target}")
    return 0


# --- a sweep's worker processes ----------------------------------------------------------------------

MAX_CARRIED_DATA_BYTES = 1024**3  # a dataset registered as arrays goes to each worker by value: at most this


@dataclass(frozen=True)
class Carried:
    """What a sweep's worker process (a fresh interpreter: ``fedgc.sweeps.jobs``) registers before it runs
    a point, so that it knows the plugins the point names as this process does: an import path is
    imported again under this process's policy, an installed plugin's entry points are called, and a
    plugin registered from Python is imported by its module path (a class or function defined in an
    importable module) or, a dataset given as arrays, carried by value."""

    sys_path: tuple[str, ...]
    allowed: tuple[str, ...] | None  # the import policy (``node_policy``) this process ran under
    entry_points: bool
    import_paths: tuple[tuple[str, str], ...]  # (kind, path)
    python: tuple[tuple[str, str, Any], ...]  # (kind, name, what to register: references, or UserData)


def _reference(obj: Any) -> tuple[str, str] | None:
    """``(module, qualname)`` by which a fresh process imports ``obj`` back, or None when it cannot: an
    object defined in ``__main__`` (a script, a notebook, ``python -c``), inside a function, or not found
    under its own name in its module."""
    import sys

    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    loaded = sys.modules.get(module)
    if module in ("__main__", "__mp_main__") or loaded is None or getattr(loaded, "__spec__", None) is None:
        return None
    found: Any = loaded
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return (module, qualname) if found is obj else None


def _carry_python(kind: str, name: str) -> tuple[str, str, Any]:
    """How a worker registers ``name`` (registered from Python here), or ``PluginError`` saying why it cannot."""
    import numpy as np

    from fedgc.aggregation.aggregators import AGGREGATORS
    from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS
    from fedgc.compress.registry import COMPRESSORS
    from fedgc.data.user import USER_DATASETS, UserData
    from fedgc.models import MODELS

    def refuse(obj: Any, why: str) -> PluginError:
        where = {"model": "model.name", "dataset": "data.dataset", "compressor": "compression.name",
                 "aggregator": "strategy.aggregation", "server_optimizer": "strategy.server_optimizer"}[kind]
        return PluginError(f"{kind} {name!r} was registered from Python ({_qualname(obj)[:120]}), which a sweep's "
                           f"worker processes cannot register again: {why}; name it by import path instead "
                           f"({where}: package.module:attribute), or run the sweep with jobs=1")

    if kind == "model":
        build = MODELS[name]
        builder, options = getattr(build, "__wrapped__", build), getattr(build, "registered_options", None)
        for part in (builder, options):
            if part is not None and _reference(part) is None:
                raise refuse(part, "it is not importable by its module path in a fresh process "
                             "(defined in __main__, a notebook or a function)")
        return (kind, name, (_reference(builder), _reference(options) if options is not None else None))
    if kind == "dataset":
        data = USER_DATASETS[name]
        if isinstance(data, UserData):
            arrays = [getattr(data, f) for f in ("x_train", "y_train", "x_test", "y_test", "groups")]
            if not all(a is None or isinstance(a, np.ndarray) for a in arrays):
                raise refuse(data, "its UserData holds something other than numpy arrays")
            size = sum(a.nbytes for a in arrays if a is not None)
            if size > MAX_CARRIED_DATA_BYTES:
                raise refuse(data, f"its arrays hold {size / 2**30:.1f} GiB, more than the "
                             f"{MAX_CARRIED_DATA_BYTES / 2**30:.0f} GiB a sweep sends each worker")
            return (kind, name, data)
        if _reference(data) is None:
            raise refuse(data, "its function is not importable by its module path in a fresh process "
                         "(defined in __main__, a notebook or a function)")
        return (kind, name, _reference(data))
    # cast: the registries' classes differ, so mypy joins them to object
    table = cast(dict[str, Any], {"compressor": COMPRESSORS, "aggregator": AGGREGATORS,
                                  "server_optimizer": SERVER_OPTIMIZERS}[kind])
    if _reference(table[name]) is None:
        raise refuse(table[name], "its class is not importable by its module path in a fresh process "
                     "(defined in __main__, a notebook or a function)")
    return (kind, name, _reference(table[name]))


def carried_plugins(scenarios: list[Any]) -> Carried:
    """What a sweep's workers must register to run ``scenarios`` (validated ``Scenario`` objects) as this
    process would; ``PluginError`` (one line naming the plugin, saying to use an import path) for a plugin
    registered from Python that a fresh process cannot import, before any worker starts."""
    import sys

    from fedgc.plugins.import_paths import _allowed_modules

    paths: dict[tuple[str, str], None] = {}
    python: dict[tuple[str, str], tuple[str, str, Any]] = {}
    entry_points = False
    for scenario in scenarios:
        for section, key, kind in PLUGIN_KEYS:
            name = getattr(getattr(scenario, section), key, None)
            source = _SOURCES.get((kind, name)) if isinstance(name, str) else None
            # cast: a source is found only for a str name (the isinstance check above)
            if source == "import path":
                paths[(kind, cast(str, name))] = None
            elif source == "python" and (kind, name) not in python:
                python[(kind, cast(str, name))] = _carry_python(kind, cast(str, name))
            elif source is not None and source.startswith("plugin "):
                entry_points = True
    return Carried(tuple(sys.path), _allowed_modules.get(), entry_points, tuple(paths), tuple(python.values()))


def _imported(reference: tuple[str, str]) -> Any:
    module, qualname = reference
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def register_carried(carried: Carried) -> None:
    """In a sweep's worker: register what ``carried_plugins`` listed, as the sweep's own process had
    (its ``sys.path`` entries first, then under its import policy). Registering again what this process
    registered already is a no-op: a worker runs several points. A failure is a ``PluginError`` naming
    the plugin."""
    import sys

    from fedgc.plugins.import_paths import _allowed_modules

    for entry in reversed(carried.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    token = _allowed_modules.set(carried.allowed)
    try:
        if carried.entry_points:
            load_entry_points()
        for kind, path in carried.import_paths:
            resolve(kind, path)
        for kind, name, what in carried.python:
            if _SOURCES.get((kind, name)) == "python":
                continue
            try:
                if kind == "model":
                    builder, options = what
                    _add_model(name, _imported(builder), _imported(options) if options else None, "python")
                elif kind == "dataset":
                    _add_dataset(name, what if not isinstance(what, tuple) else _imported(what), "python")
                elif kind == "compressor":
                    _add_compressor(_imported(what), name, "python")
                else:
                    _add_server_part(kind, _imported(what), name, "python")
            except PluginError:
                raise
            except (Exception, SystemExit) as err:  # noqa: BLE001 — the plugin's module, importing: one line
                raise PluginError(f"{kind} {name!r}: a sweep's worker could not import it again ({type(err).__name__}: "
                                  f"{err})".splitlines()[0][:300]) from None
    finally:
        _allowed_modules.reset(token)
