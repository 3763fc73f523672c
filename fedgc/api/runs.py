"""``fedgc.run`` and ``fedgc.load_run``: one run, in this process, as a ``Run`` you can read.

The command line's ``fedgc run`` goes through ``run_in_folder`` too: one code path."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from fedgc.core.observe import CallbackObserver, Recorder, RoundObserver
from fedgc.errors import ChoiceError, expect
from fedgc.runs.metrics import ClientRecord, MetricsFileError, RoundRecord, Summary, read_jsonl
from fedgc.scenario.errors import ScenarioError
from fedgc.scenario.model import Scenario, dump_scenario, validate

MODEL_FILE_MAX_BYTES = 4 * 1024**3  # model.pt of the largest model fedgc builds (2^28 fp32 parameters) and more
PATH_MAX_CHARS = 4096  # Linux's PATH_MAX: a longer path names no file


def path_argument(value: object, argument: str, what: str = "a folder's path") -> Path:
    """``value`` (a ``str`` or ``os.PathLike`` of text, at most 4096 characters, no NUL byte) as a
    ``Path``; ``ChoiceError`` (one line naming ``argument``) otherwise, before anything is read or made."""
    try:
        text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    except Exception:  # noqa: BLE001 — a PathLike whose __fspath__ raises names no path
        text = None
    expect(isinstance(text, str) and 0 < len(text) <= PATH_MAX_CHARS and "\0" not in text, argument, value,
           f"{what} (text of 1 to {PATH_MAX_CHARS} characters, no NUL byte)")
    return Path(cast(str, text))


@dataclass
class Run:
    """A finished (or stopped) run: what its run folder holds, in memory.

    ``summary``: the ``summary.json`` fields; ``rounds``: one record per attempt of a round
    (``metrics.jsonl``); ``clients``: one record per selected client and attempt (``clients.jsonl``);
    ``weights``: the final (or last good) global model's ``state_dict``; ``out_dir``: the run folder,
    or None for a run that wrote no files; ``label``: its name in tables (the run folder's, a sweep
    point's ``KEY=VALUE,...``, else the scenario's)."""

    scenario: Scenario
    summary: Summary
    rounds: list[RoundRecord]
    clients: list[ClientRecord]
    weights: dict[str, torch.Tensor]
    out_dir: Path | None = None
    label: str = ""  # its name in tables: the run folder's (a sweep point's), else the scenario's

    def __post_init__(self) -> None:
        if not self.label:
            self.label = self.out_dir.name if self.out_dir is not None else self.scenario.name

    @property
    def model(self) -> nn.Module:
        """The final global model, built from the scenario and loaded with ``weights`` (on the CPU). This
        builds it: a plugin the scenario names is imported and run here (``load_run`` never does)."""
        from fedgc.core.parts import build_model_for, federated_data

        scenario = as_scenario(self.scenario)
        model = build_model_for(scenario, federated_data(scenario))
        model.load_state_dict(self.weights)
        return model

    def to_pandas(self, table: str = "rounds") -> Any:
        """``rounds`` (default) or ``clients`` as a ``pandas.DataFrame`` (needs pandas: ``pip install pandas``)."""
        if table not in ("rounds", "clients"):
            raise ChoiceError(f"table must be 'rounds' or 'clients', not {str(table)[:40]!r}")
        try:
            import pandas  # type: ignore[import-untyped]  # pandas-stubs not installed
        except ImportError:
            raise ImportError("Run.to_pandas needs pandas, which is not installed: pip install pandas") from None
        records = self.rounds if table == "rounds" else self.clients
        return pandas.DataFrame([asdict(r) for r in records])


def as_scenario(scenario: Scenario | dict[str, Any] | str | Path) -> Scenario:
    """A ``Scenario`` from a scenario, a dict of scenario keys or the path of a YAML file, its plugins
    imported (one read by ``load_run`` is validated again, its plugins now imported and checked)."""
    if isinstance(scenario, Scenario):
        if not scenario.unchecked_plugins:
            return scenario
        from fedgc.plugins.import_paths import PluginError
        from fedgc.plugins.registry import load_entry_points, missing_plugins

        load_entry_points()  # an installed plugin's names are known once it is called
        missing = missing_plugins(scenario.unchecked_plugins)
        if missing:
            kind, _, name = missing[0].partition(" ")
            raise PluginError(f"{kind} {name!r}: the run was made with it registered in another process; register "
                              f"it in this one (fedgc.register_{kind}) or name it by import path to build or run "
                              "the scenario (its records read without it)")
        return validate(scenario.model_dump(mode="json"))
    if isinstance(scenario, dict):
        return validate(scenario)
    if isinstance(scenario, (str, Path)):
        return Scenario.from_yaml(scenario)
    raise ScenarioError(f"scenario: expected a Scenario, a dict or a YAML file's path, not {type(scenario).__name__}")


def run_in_folder(scenario: Scenario, out_dir: Path | None, *, quiet: bool = True, resume: bool = False,
                  observers: Sequence[RoundObserver] = ()) -> Run:
    """Run ``scenario`` on its engine into ``out_dir`` (a claimed run folder holding its scenario.yaml,
    or None for no files) and return what it produced."""
    from fedgc.runs.engines import run_scenario

    recorder = Recorder()
    summary = run_scenario(scenario, out_dir, quiet=quiet, resume=resume, observers=[recorder, *observers])
    if recorder.summary is not None:  # the loop ran in this process (inline engine)
        return Run(scenario, summary, recorder.rows, recorder.clients, recorder.weights or {}, out_dir)
    if out_dir is None:
        raise RuntimeError("the run's engine kept no results: give it a run folder")
    run = load_run(out_dir)  # the loop ran in Flower's runtime: its folder holds what it did
    for observer in observers:  # they could not watch it live: they see the rounds now
        for record in run.rounds:
            observer.round_done(record, [c for c in run.clients if c.round == record.round])
        observer.finished(run.summary, run.rounds, run.weights)
    return run


def run(scenario: Scenario | dict[str, Any] | str | Path, out: str | Path | None = None, *, overwrite: bool = False,
        on_round: Callable[[RoundRecord], object] | None = None, quiet: bool = True) -> Run:
    """Run a scenario in this process and return the ``Run``.

    ``out``: a run folder to write (new or empty; ``overwrite=True`` clears one that holds an earlier
    run), exactly what ``fedgc run --out`` writes; None (default) writes no files and keeps the
    results in memory. ``on_round(record)`` is called after each attempt of a round (on ``engine:
    flower`` the runtime runs elsewhere: the calls come when the run ends). ``quiet=False`` shows
    the progress line. Invalid input raises ``ScenarioError`` (one line)."""
    expect(on_round is None or callable(on_round), "on_round", on_round, "a function of a RoundRecord, or None")
    out_dir = None if out is None else path_argument(out, "out", "a run folder's path")
    scenario = as_scenario(scenario)
    observers = [CallbackObserver(on_round)] if on_round is not None else []
    if out is None:
        if scenario.engine == "inline":
            return run_in_folder(scenario, None, quiet=quiet, observers=observers)
        with tempfile.TemporaryDirectory(prefix="fedgc-run-") as tmp:  # Flower's runtime writes a folder
            result = _run_claimed(scenario, Path(tmp) / scenario.name, overwrite=False, quiet=quiet, observers=observers)
            result.out_dir = None
            return result
    assert out_dir is not None
    return _run_claimed(scenario, out_dir, overwrite=overwrite, quiet=quiet, observers=observers)


def _run_claimed(scenario: Scenario, out_dir: Path, *, overwrite: bool, quiet: bool,
                 observers: Sequence[RoundObserver]) -> Run:
    from fedgc.bounded import write_whole, writing
    from fedgc.runs.folder import claim_folder

    with claim_folder(out_dir, overwrite=overwrite):
        with writing(out_dir / "scenario.yaml"):
            write_whole(out_dir / "scenario.yaml", dump_scenario(scenario))
        return run_in_folder(scenario, out_dir, quiet=quiet, observers=observers)


def _client_records(path: Path) -> list[ClientRecord]:
    if not path.is_file():
        return []
    names = {f.name for f in fields(ClientRecord)}
    try:
        return [ClientRecord(**{k: v for k, v in row.items() if k in names}) for row in read_jsonl(path)]
    except (TypeError, ValueError, AttributeError) as err:
        raise MetricsFileError(f"{path}: not a clients.jsonl ({type(err).__name__})") from None


def expected_tensors(scenario: Scenario) -> dict[str, tuple[str, tuple[int, ...] | None]] | None:
    """``{name: (dtype, shape)}`` of the scenario's model's ``state_dict``, from a build of the built-in
    model on PyTorch's ``meta`` device (nothing allocated, no user code); the shape None where only the
    data's files tell it (the model's input). None for a plugin model: it is never built to read a run."""
    from fedgc.data.config import known_input
    from fedgc.models import tensor_specs
    from fedgc.plugins.registry import is_built_in

    if scenario.unchecked_plugins and any(p.startswith("model ") for p in scenario.unchecked_plugins):
        return None
    if not is_built_in("model", scenario.model.name):
        return None
    known = None if any(p.startswith("dataset ") for p in scenario.unchecked_plugins) else known_input(scenario.data)
    for shape, classes in ([known] if known is not None else []) + [((1, 28, 28), 10), ((80,), 80), ((1,), 2)]:
        try:
            specs = tensor_specs(scenario.model.name, shape, classes, scenario.model.options)
        except Exception:  # noqa: BLE001 — a model that cannot take this input: try the next one
            known = None
            continue
        return {k: (dtype, tuple(sh) if known is not None else None) for k, (dtype, sh) in specs.items()}
    return None


def load_weights(path: Path, expected: dict[str, tuple[str, tuple[int, ...] | None]] | None = None
                 ) -> dict[str, torch.Tensor]:
    """A ``model.pt`` (a ``state_dict`` of tensors), read with ``weights_only``; one-line errors.
    ``expected`` (``expected_tensors``): its tensors' names and dtypes, and shapes where known, must be
    those; with every shape known, a file much larger than those tensors is refused unread."""
    from fedgc.reports.run_reports import RunFolderError

    if not path.is_file():
        raise RunFolderError(f"{path}: no such file")
    limit = MODEL_FILE_MAX_BYTES
    if expected is not None and all(shape is not None for _, shape in expected.values()):
        payload = sum(math.prod(shape) * torch.empty(0, dtype=getattr(torch, dtype)).element_size()
                      for dtype, shape in expected.values() if shape is not None)
        limit = min(limit, payload + 1024 * len(expected) + 64 * 1024)  # torch.save's zip: names, headers
    if path.stat().st_size > limit:
        raise RunFolderError(f"{path}: larger than {limit} bytes" + (" (the scenario's model is smaller)"
                                                                      if limit < MODEL_FILE_MAX_BYTES else ""))
    try:
        weights = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 — any unpickling error is one line
        raise RunFolderError(f"{path}: not a model file ({type(err).__name__})") from None
    if not isinstance(weights, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                for k, v in weights.items()):
        raise RunFolderError(f"{path}: not a state_dict of tensors")
    if expected is not None:
        problem = _mismatch(weights, expected)
        if problem is not None:
            raise RunFolderError(f"{path}: not the scenario's model ({problem})")
    return weights


def _mismatch(weights: dict[str, torch.Tensor], expected: dict[str, tuple[str, tuple[int, ...] | None]]) -> str | None:
    missing, extra = [k for k in expected if k not in weights], [k for k in weights if k not in expected]
    if missing or extra:
        return f"no tensor {missing[0][:80]}" if missing else f"an unknown tensor {extra[0][:80]}"
    for name, (dtype, shape) in expected.items():
        found = str(weights[name].dtype).removeprefix("torch.")
        if found != dtype:
            return f"{name} is {found}, the model's is {dtype}"
        if shape is not None and tuple(weights[name].shape) != shape:
            return f"{name} has shape {tuple(weights[name].shape)}, the model's is {shape}"
    return None


def load_run(path: str | Path) -> Run:
    """A run folder written by ``fedgc run`` or ``fedgc.run(..., out=...)``, read back. A folder that
    is not a finished run raises ``fedgc.reports.run_reports.RunFolderError`` (a ``ValueError``, one line)."""
    from fedgc.reports.run_reports import RunFolderError

    folder = path_argument(path, "load_run's path", "a run folder's path")
    try:
        return _load_run(folder)
    except OSError as err:  # a name too long, a folder it may not read: one line, as any unreadable folder
        raise RunFolderError(f"{str(folder)[:200]}: cannot read it ({err.strerror or type(err).__name__})") from None


def _load_run(folder: Path) -> Run:
    from fedgc.reports.run_reports import RunFolderError, read_run

    result = read_run(folder)
    from fedgc.plugins.registry import reading_records

    try:
        with reading_records():  # a plugin registered in the run's own process only is no error here
            scenario = validate(result.scenario, imports=False)  # reading runs no plugin
    except ScenarioError as err:
        raise RunFolderError(f"{folder / 'scenario.yaml'}: {err}") from None
    try:
        clients = _client_records(folder / "clients.jsonl")
    except MetricsFileError as err:
        raise RunFolderError(str(err)) from None
    weights = load_weights(folder / "model.pt", expected_tensors(scenario))
    return Run(scenario, result.summary, result.rows, clients, weights, folder)


def runs_in(out: str | Path | None, prefix: str, run_into: Callable[[Path], list[Run]]) -> tuple[list[Run], Path | None]:
    """``run_into(folder)`` into ``out``; without one, into a temporary folder removed after, the runs
    then held in memory only (their ``out_dir`` None). Returns the runs and the folder kept."""
    if out is not None:
        folder = path_argument(out, "out")
        return run_into(folder), folder
    with tempfile.TemporaryDirectory(prefix=f"fedgc-{prefix}-") as tmp:
        runs = run_into(Path(tmp) / prefix)
        for r in runs:
            r.out_dir = None
        return runs, None
