"""Hostile Python objects given to the rest of the public API (docs/api.md, "The same, by call"): a path
that is no text, a name too long for the file system, a NUL byte, a broken ``.npz``, a declared class
count no model can have, a plugin name that reads as an import path. Each is one line of the
``fedgc.FedgcError`` family, of the documented class, raised before anything is read, run or made —
never a ``TypeError``, ``OSError``, ``zipfile.BadZipFile`` or numpy's ``ValueError`` from inside."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fedgc

pytestmark = pytest.mark.usefixtures("isolated_registries")

TINY = {"name": "hostile-tiny", "seed": 0, "rounds": 1,
        "data": {"dataset": "digits", "num_clients": 2, "partition": "iid"},
        "model": {"name": "mlp", "options": {"hidden": [8]}},
        "client": {"local_steps": 1, "batch_size": 8}, "checkpoint_every": 0}

X = np.zeros((8, 3), dtype=np.float32)
Y = np.arange(8, dtype=np.int64) % 2
TOO_LONG = "x" * 5000  # no file system takes a name this long (255 bytes a name, 4096 a path)


def _garbage_npz(tmp):
    (tmp / "broken.npz").write_bytes(b"PK\x03\x04 not a zip archive")
    return fedgc.UserData.from_npz(tmp / "broken.npz")


def _builder(input_shape, num_classes):  # never called: registration refuses first
    raise AssertionError("not built")


CASES = {  # a call given a hostile object -> (the error's class, how its line starts)
    "load_run(None)": (lambda tmp: fedgc.load_run(None), "ChoiceError", "load_run's path must be a run folder's path"),
    "load_run(bytes)": (lambda tmp: fedgc.load_run(bytes(tmp)), "ChoiceError", "load_run's path must be"),
    "load_run(a name too long)": (lambda tmp: fedgc.load_run(TOO_LONG), "ChoiceError", "load_run's path must be"),
    "load_sweep(5)": (lambda tmp: fedgc.load_sweep(5), "ChoiceError", "load_sweep's path must be a sweep folder's path"),
    "load_sweep(a name too long)": (lambda tmp: fedgc.load_sweep(TOO_LONG), "ChoiceError", "load_sweep's path must be"),
    "report([], out=5)": (lambda tmp: fedgc.report([], out=5), "ChoiceError", "out must be a folder's path"),
    "run(out=5)": (lambda tmp: fedgc.run(TINY, out=5), "ChoiceError", "out must be a run folder's path"),
    "run(out with a NUL byte)": (lambda tmp: fedgc.run(TINY, out=f"{tmp}/a\0b"), "ChoiceError", "out must be"),
    "sweep(out=5)": (lambda tmp: fedgc.sweep(TINY, seeds=[0], out=5), "ChoiceError", "out must be a sweep folder's path"),
    "baseline(out=[])": (lambda tmp: fedgc.baseline(TINY, out=[]), "ChoiceError", "out must be a comparison folder's path"),
    "UserData.from_npz(None)": (lambda tmp: fedgc.UserData.from_npz(None), "UserDataError",
                                "path: expected a .npz file's path, not NoneType"),
    "UserData.from_npz(a broken zip)": (_garbage_npz, "UserDataError", "/"),  # its path, then: not a readable .npz
    "UserData num_classes='10'": (lambda tmp: fedgc.UserData(X, Y, X, Y, num_classes="10").central("mine"),
                                  "UserDataError", "dataset mine: num_classes must be a whole number from 1 to 1,048,576"),
    "UserData num_classes=2**40": (lambda tmp: fedgc.UserData(X, Y, X, Y, num_classes=2**40).central("mine"),
                                   "UserDataError", "dataset mine: num_classes must be a whole number"),
    "UserData num_classes=2.5": (lambda tmp: fedgc.UserData(X, Y, X, Y, num_classes=2.5).central("mine"),
                                 "UserDataError", "dataset mine: num_classes must be a whole number"),
    "UserData labels declaring 10**9 classes": (
        lambda tmp: fedgc.UserData(X, np.full(8, 10**9, dtype=np.int64), X, Y).central("mine"),
        "UserDataError", "dataset mine: labels must lie in [0, 1048576)"),
    "UserData of ragged lists": (lambda tmp: fedgc.UserData([[1.0], [1.0, 2.0]], [0, 1], X, Y).central("mine"),
                                 "UserDataError", "dataset mine: x_train and y_train must be arrays"),
    "register_model('pkg:net')": (lambda tmp: fedgc.register_model("pkg:net", _builder), "PluginError",
                                  "model name 'pkg:net': a ':' marks an import path"),
    "register_dataset('hf:mine')": (lambda tmp: fedgc.register_dataset("hf:mine", fedgc.UserData(X, Y, X, Y)),
                                    "PluginError", "dataset name 'hf:mine': a ':' marks an import path"),
    "register_model(replace='yes')": (lambda tmp: fedgc.register_model("mine", _builder, replace="yes"), "PluginError",
                                      "model 'mine': replace must be True or False, not 'yes'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_object_is_one_line_of_the_family_before_anything_runs(tmp_path, case):
    call, kind, start = CASES[case]
    with pytest.raises(fedgc.FedgcError) as caught:
        call(tmp_path)
    line = str(caught.value)
    assert type(caught.value).__name__ == kind, repr(caught.value)
    assert line.startswith(start) and "\n" not in line and len(line) <= 400, line
    assert isinstance(caught.value, ValueError)
    if case == "UserData.from_npz(a broken zip)":
        assert line.endswith("broken.npz: not a readable .npz (File is not a zip file)"), line
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "broken.npz") == []  # nothing made


def test_a_name_too_long_for_the_file_system_reads_as_an_unreadable_folder(tmp_path):
    """A path of text the system cannot open (a name over 255 bytes) is the folder's one line, the
    reason the system gave, not an ``OSError``."""
    for call in (fedgc.load_run, fedgc.load_sweep):
        with pytest.raises(fedgc.RunFolderError) as caught:
            call(tmp_path / ("y" * 300))
        assert "File name too long" in str(caught.value) and "\n" not in str(caught.value)



def _returning(result_of):
    """An aggregation rule of the user's whose ``aggregate`` returns ``result_of(shapes)``."""

    class Wrong(fedgc.Aggregator):
        name = "wrong_rule"
        weighted = True

        def aggregate(self, updates, shapes, device):  # type: ignore[no-untyped-def]
            return result_of(shapes)

    return Wrong


@pytest.mark.parametrize(("result_of", "says"), [
    (lambda shapes: {}, "no tensor for"),
    (lambda shapes: [torch.zeros(s) for s in shapes.values()], "a list, not a dict of tensors"),
    (lambda shapes: {**{n: torch.zeros(s) for n, s in shapes.items()}, "extra": torch.zeros(1)}, "a tensor for no parameter"),
    (lambda shapes: {n: torch.zeros(s).flatten() for n, s in shapes.items()}, "shape"),
    (lambda shapes: {n: torch.zeros(s, dtype=torch.int64) for n, s in shapes.items()}, "torch.int64 tensor"),
    (lambda shapes: {n: np.zeros(s) for n, s in shapes.items()}, "a ndarray"),
])
def test_an_aggregation_rule_returning_no_aggregate_stops_the_run_in_one_line_naming_it(result_of, says):
    """Before, such a rule crashed the run deep in the server optimizer (a raw KeyError, RuntimeError or
    TypeError): every round would fail the same way, so the run stops, with one line naming the rule."""
    fedgc.register_aggregator(_returning(result_of))
    scenario = fedgc.Scenario.build(name="wrong", rounds=2, data={"dataset": "digits", "num_clients": 3},
                                    compression={"name": "none"}, strategy={"fraction": 1.0, "aggregation": "wrong_rule"},
                                    client={"local_steps": 1, "batch_size": 16}, checkpoint_every=0)
    with pytest.raises(fedgc.FedgcError) as err:
        fedgc.run(scenario)
    assert type(err.value).__name__ == "PluginError"
    message = str(err.value)
    assert "\n" not in message and message.startswith("aggregator 'wrong_rule': aggregate() returned") and says in message
