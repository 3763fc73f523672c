"""``fedgc.run`` and ``fedgc.load_run``: one run, in this process, as a ``Run`` you can read.

The command line's ``fedgc run`` goes through ``run_in_folder`` too: one code path."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from fedgc.core.observe import CallbackObserver, Recorder, RoundObserver
from fedgc.metrics import ClientRecord, MetricsFileError, RoundRecord, Summary, read_jsonl
from fedgc.scenario import Scenario, ScenarioError, dump_scenario, validate

MODEL_FILE_MAX_BYTES = 4 * 1024**3  # model.pt of the largest model fedgc builds (2^28 fp32 parameters) and more


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
        """The final global model, built from the scenario and loaded with ``weights`` (on the CPU)."""
        from fedgc.core.parts import build_model_for, federated_data

        model = build_model_for(self.scenario, federated_data(self.scenario))
        model.load_state_dict(self.weights)
        return model

    def to_pandas(self, table: str = "rounds") -> Any:
        """``rounds`` (default) or ``clients`` as a ``pandas.DataFrame`` (needs pandas: ``pip install pandas``)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Run.to_pandas needs pandas, which is not installed: pip install pandas") from None
        if table not in ("rounds", "clients"):
            raise ValueError(f"table must be 'rounds' or 'clients', not {table!r}")
        records = self.rounds if table == "rounds" else self.clients
        return pandas.DataFrame([asdict(r) for r in records])


def as_scenario(scenario: Scenario | dict | str | Path) -> Scenario:
    """A ``Scenario`` from a scenario, a dict of scenario keys or the path of a YAML file."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, dict):
        return validate(scenario)
    if isinstance(scenario, (str, Path)):
        return Scenario.from_yaml(scenario)
    raise ScenarioError(f"scenario: expected a Scenario, a dict or a YAML file's path, not {type(scenario).__name__}")


def run_in_folder(scenario: Scenario, out_dir: Path | None, *, quiet: bool = True, resume: bool = False,
                  observers: list[RoundObserver] = ()) -> Run:
    """Run ``scenario`` on its engine into ``out_dir`` (a claimed run folder holding its scenario.yaml,
    or None for no files) and return what it produced."""
    from fedgc.engines import run_scenario

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


def run(scenario: Scenario | dict | str | Path, out: str | Path | None = None, *, overwrite: bool = False,
        on_round: Callable[[RoundRecord], object] | None = None, quiet: bool = True) -> Run:
    """Run a scenario in this process and return the ``Run``.

    ``out``: a run folder to write (new or empty; ``overwrite=True`` clears one that holds an earlier
    run), exactly what ``fedgc run --out`` writes; None (default) writes no files and keeps the
    results in memory. ``on_round(record)`` is called after each attempt of a round (on ``engine:
    flower`` the runtime runs elsewhere: the calls come when the run ends). ``quiet=False`` shows
    the progress line. Invalid input raises ``ScenarioError`` (one line)."""
    scenario = as_scenario(scenario)
    observers = [CallbackObserver(on_round)] if on_round is not None else []
    if out is None:
        if scenario.engine == "inline":
            return run_in_folder(scenario, None, quiet=quiet, observers=observers)
        with tempfile.TemporaryDirectory(prefix="fedgc-run-") as tmp:  # Flower's runtime writes a folder
            result = _run_claimed(scenario, Path(tmp) / scenario.name, overwrite=False, quiet=quiet, observers=observers)
            result.out_dir = None
            return result
    return _run_claimed(scenario, Path(out), overwrite=overwrite, quiet=quiet, observers=observers)


def _run_claimed(scenario: Scenario, out_dir: Path, *, overwrite: bool, quiet: bool,
                 observers: list[RoundObserver]) -> Run:
    from fedgc.bounded import writing
    from fedgc.run_folder import claim_folder

    with claim_folder(out_dir, overwrite=overwrite):
        with writing(out_dir / "scenario.yaml"):
            (out_dir / "scenario.yaml").write_text(dump_scenario(scenario))
        return run_in_folder(scenario, out_dir, quiet=quiet, observers=observers)


def _client_records(path: Path) -> list[ClientRecord]:
    if not path.is_file():
        return []
    names = {f.name for f in fields(ClientRecord)}
    try:
        return [ClientRecord(**{k: v for k, v in row.items() if k in names}) for row in read_jsonl(path)]
    except (TypeError, ValueError, AttributeError) as err:
        raise MetricsFileError(f"{path}: not a clients.jsonl ({type(err).__name__})") from None


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    """A ``model.pt`` (a ``state_dict`` of tensors), read with ``weights_only``; one-line errors."""
    from fedgc.run_reports import RunFolderError

    if not path.is_file():
        raise RunFolderError(f"{path}: no such file")
    if path.stat().st_size > MODEL_FILE_MAX_BYTES:
        raise RunFolderError(f"{path}: larger than {MODEL_FILE_MAX_BYTES} bytes")
    try:
        weights = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 — any unpickling error is one line
        raise RunFolderError(f"{path}: not a model file ({type(err).__name__})") from None
    if not isinstance(weights, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                for k, v in weights.items()):
        raise RunFolderError(f"{path}: not a state_dict of tensors")
    return weights


def load_run(path: str | Path) -> Run:
    """A run folder written by ``fedgc run`` or ``fedgc.run(..., out=...)``, read back. A folder that
    is not a finished run raises ``fedgc.run_reports.RunFolderError`` (a ``ValueError``, one line)."""
    from fedgc.run_reports import RunFolderError, read_run

    folder = Path(path)
    result = read_run(folder)
    try:
        scenario = validate(result.scenario)
    except ScenarioError as err:
        raise RunFolderError(f"{folder / 'scenario.yaml'}: {err}") from None
    try:
        clients = _client_records(folder / "clients.jsonl")
    except MetricsFileError as err:
        raise RunFolderError(str(err)) from None
    return Run(scenario, result.summary, result.rows, clients, load_weights(folder / "model.pt"), folder)


def runs_in(out: str | Path | None, prefix: str, run_into: Callable[[Path], list[Run]]) -> tuple[list[Run], Path | None]:
    """``run_into(folder)`` into ``out``; without one, into a temporary folder removed after, the runs
    then held in memory only (their ``out_dir`` None). Returns the runs and the folder kept."""
    if out is not None:
        return run_into(Path(out)), Path(out)
    with tempfile.TemporaryDirectory(prefix=f"fedgc-{prefix}-") as tmp:
        runs = run_into(Path(tmp) / prefix)
        for r in runs:
            r.out_dir = None
        return runs, None
