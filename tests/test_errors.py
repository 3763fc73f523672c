"""One error family: every one-line user error fedgc raises from its public calls is a
``fedgc.FedgcError`` (docs/api.md, "Errors"), and keeps the base that code caught before the family
existed (``ValueError``), so ``except fedgc.FedgcError`` and ``except ValueError`` both catch it."""

from __future__ import annotations

import numpy as np
import pytest

import fedgc

pytestmark = pytest.mark.usefixtures("isolated_registries")

TINY = {"name": "errors-tiny", "seed": 0, "rounds": 1,
        "data": {"dataset": "digits", "num_clients": 2, "partition": "iid"},
        "model": {"name": "mlp", "options": {"hidden": [8]}},
        "client": {"local_steps": 1, "batch_size": 8}, "checkpoint_every": 0}


def _caught(call) -> fedgc.FedgcError:
    """What ``call`` raises, caught as a FedgcError (anything else fails the test), one line."""
    try:
        call()
    except fedgc.FedgcError as err:
        assert str(err) and "\n" not in str(err), repr(err)
        return err
    pytest.fail("no error raised")


def _run_on_bad_user_data() -> None:
    x = np.zeros((8, 3), dtype=np.float32)
    x[0, 0] = np.nan
    y = np.arange(8, dtype=np.int64) % 2
    fedgc.register_dataset("nan_data", fedgc.UserData(x, y, x, y))
    fedgc.run({**TINY, "data": {"dataset": "nan_data", "num_clients": 2, "partition": "iid"}})


def _folder_holding_a_file(tmp_path):
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "notes.txt").write_text("mine")
    return fedgc.run(TINY, out=tmp_path / "held")


CALLS = {  # a documented error, and a real call that raises it
    "ScenarioError: a bad scenario": (lambda tmp: fedgc.Scenario.from_dict({**TINY, "rounds": "many"}), "ScenarioError"),
    "ScenarioError: an unknown dataset": (
        lambda tmp: fedgc.Scenario.from_dict({**TINY, "data": {"dataset": "no_such_data"}}), "ScenarioError"),
    "UserDataError: a run on non-finite features": (lambda tmp: _run_on_bad_user_data(), "UserDataError"),
    "RunFolderError: load_run of a folder that holds no run": (lambda tmp: fedgc.load_run(tmp), "RunFolderError"),
    "RunFolderError: run into a folder holding files": (_folder_holding_a_file, "RunFolderError"),
    "SweepError: a sweep of nothing": (lambda tmp: fedgc.sweep(TINY, {}), "SweepError"),
    "SweepError: a sweep of an unknown key": (lambda tmp: fedgc.sweep(TINY, {"rounds.nope": [1, 2]}), "SweepError"),
    "PluginError: an import path that does not resolve": (
        lambda tmp: fedgc.Scenario.from_dict({**TINY, "model": {"name": "no_such_module_here:Net"}}), "PluginError"),
    "PluginError: a model registered twice": (
        lambda tmp: [fedgc.register_model("twice", lambda shape, classes: None) for _ in range(2)], "PluginError"),
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_each_documented_error_of_a_real_call_is_a_fedgc_error_and_still_a_value_error(tmp_path, case):
    call, name = CALLS[case]
    err = _caught(lambda: call(tmp_path))
    assert type(err).__name__ == name, type(err).__mro__
    assert isinstance(err, ValueError)


def test_an_unavailable_engine_is_a_fedgc_error(tmp_path):
    """``engine: flower`` runs the clients in other processes: a dataset registered from Python in this
    one is refused before anything starts (no Ray needed to see it)."""
    x = np.random.default_rng(0).random((8, 3), dtype=np.float32)
    y = np.arange(8, dtype=np.int64) % 2
    fedgc.register_dataset("here_only", fedgc.UserData(x, y, x, y))
    scenario = {**TINY, "engine": "flower", "data": {"dataset": "here_only", "num_clients": 2, "partition": "iid"}}
    err = _caught(lambda: fedgc.run(scenario))
    assert type(err).__name__ == "EngineUnavailable" and isinstance(err, ValueError)


def test_the_family_s_classes_derive_from_fedgc_error():
    """The public names, and each documented error class by its module (docs/api.md, "Errors")."""
    from fedgc.core.checkpoint import CheckpointError
    from fedgc.data.base import DataFileError
    from fedgc.data.optional import FlowerDatasetsUnavailable
    from fedgc.data.partition.base import PartitionError
    from fedgc.data.user import UserDataError
    from fedgc.execution.device import DeviceError
    from fedgc.fetch.download import FetchError
    from fedgc.reports.tensorboard import TensorBoardUnavailable
    from fedgc.runs.engines import EngineUnavailable
    from fedgc.runs.folder import RunFolderError as ClaimError
    from fedgc.runs.metrics import MetricsFileError
    from fedgc.scenario.paths import PathError
    from fedgc.sweeps.plan import SweepError

    family = [fedgc.ScenarioError, fedgc.PluginError, fedgc.RunFolderError, ClaimError, UserDataError, SweepError,
              EngineUnavailable, CheckpointError, DataFileError, PartitionError, DeviceError, MetricsFileError,
              PathError, TensorBoardUnavailable, FetchError, FlowerDatasetsUnavailable]
    assert all(issubclass(cls, fedgc.FedgcError) for cls in family)
    assert ClaimError is fedgc.RunFolderError  # one class for a folder fedgc cannot use or read
    assert all(issubclass(cls, ValueError) for cls in family if cls is not FetchError)


BAD_ARGUMENTS = {
    "sweep, jobs=0": (lambda: fedgc.sweep("quickstart", {"rounds": [1]}, jobs=0), "jobs must be a whole number ≥ 1, not 0"),
    "sweep, jobs='2'": (lambda: fedgc.sweep("quickstart", {"rounds": [1]}, jobs="2"), "jobs must be a whole number"),
    "sweep, a grid of pairs": (lambda: fedgc.sweep("quickstart", [("rounds", [1])]), "grid must be a dict of dotted keys"),
    "sweep, a grid value not a list": (lambda: fedgc.sweep("quickstart", {"rounds": 1}), "grid must be a dict"),
    "run, on_round=5": (lambda: fedgc.run("quickstart", on_round=5), "on_round must be a function"),
    "report(5)": (lambda: fedgc.report(5), "report's runs must be a list of runs or run folders"),
    "report of one folder's path": (lambda: fedgc.report("runs/a"), "report's runs must be a list"),
    "table([1, 2])": (lambda: fedgc.table([1, 2]), "table's runs must be a list of fedgc.Run"),
    "plot into a file": (lambda: fedgc.plot([], __file__), "out must be a folder's path"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_a_public_call_refuses_an_argument_of_the_wrong_kind_in_one_line_before_it_runs(case):
    """Python objects given to the API are input too: a wrong kind is one ``ChoiceError`` line (a
    ``FedgcError``) naming the argument and what it must be, raised before anything runs — never a
    ``TypeError`` or ``AttributeError`` from inside fedgc, nor (jobs=0) a sweep that runs anyway."""
    from fedgc.errors import ChoiceError

    call, start = BAD_ARGUMENTS[case]
    with pytest.raises(ChoiceError) as caught:
        call()
    assert str(caught.value).startswith(start) and "\n" not in str(caught.value)


class _Pairs:
    """A torch-style Dataset (len and [i]) of the items given."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        return self.items[i]


HOSTILE_OBJECTS = {
    "Scenario.from_yaml(None)": (lambda: fedgc.Scenario.from_yaml(None), "ScenarioError",
                                 "scenario: expected a YAML file's path or a built-in's name, not NoneType"),
    "Scenario.from_yaml with overrides that are a list": (
        lambda: fedgc.Scenario.from_yaml("quickstart", ["rounds=3"]), "ScenarioError",
        "overrides: expected a mapping of dotted keys to values, not list"),
    "UserData.from_torch(5, 6)": (lambda: fedgc.UserData.from_torch(5, 6), "UserDataError",
                                  "train: expected a torch Dataset (len and [i]), not int"),
    "UserData.from_torch of items that are not pairs": (
        lambda: fedgc.UserData.from_torch(_Pairs([np.zeros(3)]), _Pairs([])), "UserDataError",
        "train: item 0 is not a (features, label) pair with an integer label"),
    "UserData.from_torch of an empty test set": (
        lambda: fedgc.UserData.from_torch(_Pairs([(np.zeros(2), 1)]), _Pairs([])), "UserDataError",
        "test: no samples"),
    "UserData.from_torch of features of two shapes": (
        lambda: fedgc.UserData.from_torch(_Pairs([(np.zeros(2), 1), (np.zeros(3), 0)]), _Pairs([])),
        "UserDataError", "train: the features differ in shape"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_OBJECTS))
def test_a_python_object_of_the_wrong_kind_is_one_line_of_the_family(case):
    """Objects given to the API are input: the wrong kind is a one-line ``FedgcError`` of the documented
    class, never a ``TypeError`` or numpy's ``ValueError`` from inside fedgc."""
    call, kind, start = HOSTILE_OBJECTS[case]
    with pytest.raises(fedgc.FedgcError) as caught:
        call()
    assert type(caught.value).__name__ == kind
    assert str(caught.value).startswith(start) and "\n" not in str(caught.value)
