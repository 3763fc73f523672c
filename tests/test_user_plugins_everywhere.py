"""A user's plugins go everywhere the built-ins go (docs/api.md, "Extending fedgc"): a sweep's worker
processes (``jobs > 1``) know them, a run made with them reads back in a process that never registered
them, their options refuse a key they do not declare, registration checks their interface, and a run
in which none of their updates could be applied says so.

The scripts run as a user runs them: a file in ``tmp_path`` beside the user's own plugin module,
started in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel, ConfigDict
from torch import nn

import fedgc

pytestmark = pytest.mark.usefixtures("isolated_registries")

REPO = Path(__file__).resolve().parents[1]

# The user's own module: a model, a data set (a function returning arrays) and a compressor, importable
# by its module path from the script's folder.
PLUGIN_MODULE = '''
import numpy as np
import torch
from pydantic import BaseModel
from torch import nn

import fedgc


class Net(nn.Module):
    class Options(BaseModel):  # a plain pydantic model, as the docs show it
        hidden: int = 16

    def __init__(self, input_shape, num_classes, hidden=16):
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(input_shape)), hidden), nn.ReLU(),
                                    nn.Linear(hidden, num_classes))

    def forward(self, x):
        return self.layers(x)


def blobs():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(240, 2, 4)).astype(np.float32)
    y = (x[:, 0, 0] + x[:, 1, 1] > 0).astype(np.int64)
    return fedgc.UserData(x[:200], y[:200], x[200:], y[200:])


class HalfTopK(fedgc.Compressor):
    name = "half_topk"

    def compress(self, tensor, name, ctx):
        flat = tensor.detach().flatten().float()
        keep = torch.topk(flat.abs(), max(1, flat.numel() // 2)).indices.sort().values
        return fedgc.SparsePayload(keep, flat[keep], tuple(tensor.shape))
'''

# The script: a two-seed sweep with jobs=2 (and the same with jobs=1), its plugins named as ``MODE`` says.
SWEEP_SCRIPT = '''
import json
import sys

import fedgc
import byo_plugins
from byo_plugins import Net


class ScriptNet(Net):  # defined in the script: __main__
    pass


def main(mode, out):
    keys = dict(name="byo", rounds=2, data={"num_clients": 2}, model={"options": {"hidden": 8}},
                client={"local_steps": 2, "batch_size": 16}, checkpoint_every=0)
    if mode == "import paths":
        keys["data"]["dataset"], keys["model"]["name"] = "byo_plugins:blobs", "byo_plugins:Net"
        keys["compression"] = {"name": "byo_plugins:HalfTopK"}
    else:  # registered from Python: the model and compressor by class, the data set as arrays
        fedgc.register_model("byo_net", byo_plugins.Net)
        fedgc.register_dataset("byo_blobs", byo_plugins.blobs())
        fedgc.register_compressor(byo_plugins.HalfTopK)
        keys["data"]["dataset"], keys["model"]["name"] = "byo_blobs", "byo_net"
        keys["compression"] = {"name": "half_topk"}
    if mode == "defined in the script":
        fedgc.register_model("script_net", ScriptNet)
        keys["model"]["name"] = "script_net"
    scenario = fedgc.Scenario.build(**keys)
    try:
        two = fedgc.sweep(scenario, seeds=[0, 1], jobs=2, out=out)
    except fedgc.FedgcError as err:
        return {"error": type(err).__name__, "message": str(err)}
    one = fedgc.sweep(scenario, seeds=[0, 1], jobs=1)
    return {key: [[r.summary.updates_applied, r.summary.clients_failed, r.summary.final_accuracy, r.summary.bytes_up]
                  for r in sweep.runs] for key, sweep in (("jobs2", two), ("jobs1", one))}


if __name__ == "__main__":  # as multiprocessing asks: the workers import this file again
    print(json.dumps(main(*sys.argv[1:])))
'''


def _script(tmp_path: Path, text: str, *args: str, timeout: int = 240) -> dict:
    """Run ``text`` as a script file in ``tmp_path`` (beside ``byo_plugins.py``) in a fresh interpreter;
    its last stdout line, as JSON."""
    (tmp_path / "byo_plugins.py").write_text(PLUGIN_MODULE)
    (tmp_path / "script.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(tmp_path / "script.py"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- sweeps with jobs > 1 ------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["import paths", "registered from Python"])
def test_a_sweep_s_workers_know_the_user_s_plugins_and_give_what_one_process_gives(tmp_path, mode):
    """Import paths are imported again in the workers; plugins registered from Python in an importable
    module are registered there again (a data set given as arrays goes by value). Every client of every
    point trains with the user's parts, and the numbers are those of jobs=1."""
    result = _script(tmp_path, SWEEP_SCRIPT, mode, str(tmp_path / "sweep"))
    assert "error" not in result, result
    assert [row[:2] for row in result["jobs2"]] == [[4, 0], [4, 0]]  # 2 clients x 2 rounds, none failed
    assert result["jobs2"] == result["jobs1"]


def test_a_plugin_defined_in_the_script_is_refused_before_any_worker_starts(tmp_path):
    """A class defined in ``__main__`` cannot be imported by a fresh process: one line naming the
    plugin and saying to name it by import path, before any point runs or the sweep's plan is written."""
    result = _script(tmp_path, SWEEP_SCRIPT, "defined in the script", str(tmp_path / "sweep"))
    assert result["error"] == "SweepError", result
    message = result["message"]
    assert "\n" not in message
    assert "model 'script_net'" in message and "import path" in message and "__main__" in message
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir()) == []  # no plan, no point folder


# --- reading a run in a process that never registered its plugins ---------------------------------------

READ_SCRIPT = '''
import json
import sys

import fedgc

out = sys.argv[1]
run = fedgc.load_run(out + "/run")
sweep = fedgc.load_sweep(out + "/sweep")
report = fedgc.report([out + "/run"])
try:
    run.model
    needs = None
except fedgc.FedgcError as err:
    needs = [type(err).__name__, str(err)]
print(json.dumps({"stopped": run.summary.stopped_reason, "rounds": len(run.rounds), "clients": len(run.clients),
                  "unchecked": list(run.scenario.unchecked_plugins), "options": run.scenario.model.options,
                  "weights": sorted(run.weights), "sweep": [r.summary.final_accuracy for r in sweep.runs],
                  "sweep_table": sweep.table(), "report": report, "model": needs}))
'''


def test_a_run_made_with_python_registered_plugins_reads_in_a_new_process(tmp_path):
    """Its records are data: ``load_run``, ``load_sweep`` and ``report`` read them without the plugins;
    building the model needs the model, and says so in one line naming it."""
    sys.path.insert(0, str(tmp_path))
    (tmp_path / "byo_plugins.py").write_text(PLUGIN_MODULE)
    try:
        import byo_plugins  # the user's module, written above

        fedgc.register_model("byo_net", byo_plugins.Net)
        fedgc.register_dataset("byo_blobs", byo_plugins.blobs)
        fedgc.register_compressor(byo_plugins.HalfTopK)
        scenario = fedgc.Scenario.build(name="byo", rounds=2, data={"dataset": "byo_blobs", "num_clients": 2},
                                        model={"name": "byo_net", "options": {"hidden": 8}},
                                        compression={"name": "half_topk"},
                                        client={"local_steps": 2, "batch_size": 16}, checkpoint_every=0)
        made = fedgc.run(scenario, out=tmp_path / "out" / "run")
        swept = fedgc.sweep(scenario, seeds=[0, 1], out=tmp_path / "out" / "sweep")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("byo_plugins", None)
    (tmp_path / "byo_plugins.py").unlink()  # the new process could not import it even if it tried

    read = _script(tmp_path, READ_SCRIPT, str(tmp_path / "out"))
    assert read["stopped"] == "completed" and read["rounds"] == 2 and read["clients"] == 4
    assert made.summary.updates_applied == 4
    assert read["unchecked"] == ["model byo_net", "dataset byo_blobs", "compressor half_topk"]
    assert read["options"] == {"hidden": 8}
    assert read["weights"] == sorted(made.weights)
    assert read["sweep"] == [r.summary.final_accuracy for r in swept.runs]
    assert "| byo | half_topk | 2 | 2 |" in read["sweep_table"] and "| run | half_topk | 2 |" in read["report"]
    kind, message = read["model"]
    assert kind == "PluginError" and "\n" not in message
    assert message.startswith("model 'byo_net':") and "register" in message and "import path" in message


# --- options refuse what they do not declare ----------------------------------------------------------

class PlainNet(nn.Module):
    class Options(BaseModel):  # no extra="forbid": pydantic would ignore a typo
        hidden: int = 16

    def __init__(self, input_shape, num_classes, hidden=16):
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(input_shape)), hidden), nn.ReLU(),
                                    nn.Linear(hidden, num_classes))

    def forward(self, x):
        return self.layers(x)


class PlainTrim(fedgc.Aggregator):
    name = "plain_trim"

    class Options(BaseModel):
        trim: float = 0.2

    def __init__(self, trim: float = 0.2):
        self.trim = trim

    def aggregate(self, updates, shapes, device):
        raise AssertionError("not run in these tests")


TINY = {"name": "tiny", "rounds": 1, "data": {"dataset": "digits", "num_clients": 2},
        "client": {"local_steps": 1, "batch_size": 8}, "checkpoint_every": 0}


def test_a_typo_in_a_plain_model_options_is_refused_with_the_closest_key_and_nothing_is_written(tmp_path):
    fedgc.register_model("plain_net", PlainNet)
    with pytest.raises(fedgc.ScenarioError) as caught:
        fedgc.run({**TINY, "model": {"name": "plain_net", "options": {"hiden": 64}}}, out=tmp_path / "run")
    assert str(caught.value) == "model: options.hiden: unknown key (did you mean `hidden`?) (model plain_net)"
    assert not (tmp_path / "run").exists()  # no scenario.yaml records the typo
    fedgc.register_model("plain_net_given", lambda shape, classes, hidden=16: PlainNet(shape, classes, hidden),
                         options=PlainNet.Options)
    with pytest.raises(fedgc.ScenarioError, match=r"options\.hiden: unknown key \(did you mean `hidden`\?\)"):
        fedgc.Scenario.build(**{**TINY, "model": {"name": "plain_net_given", "options": {"hiden": 64}}})


def test_a_typo_in_a_plain_aggregation_rule_s_options_is_refused_with_the_closest_key():
    fedgc.register_aggregator(PlainTrim)
    with pytest.raises(fedgc.ScenarioError) as caught:
        fedgc.Scenario.build(**TINY, strategy={"aggregation": "plain_trim", "aggregation_options": {"trimm": 0.4}})
    assert str(caught.value) == ("strategy: aggregation_options.trimm: unknown key (did you mean `trim`?) "
                                 "(plain_trim's options: trim)")
    ok = fedgc.Scenario.build(**TINY, strategy={"aggregation": "plain_trim", "aggregation_options": {"trim": 0.4}})
    assert ok.strategy.aggregation_options == {"trim": 0.4}


def test_a_compressor_whose_options_would_ignore_unknown_keys_is_refused_at_registration():
    class Lenient(fedgc.Compressor):
        name = "lenient"

        class Options(fedgc.CompressorOptions):
            model_config = ConfigDict(extra="ignore")
            scale: float = 1.0

        def compress(self, tensor, name, ctx):
            return fedgc.DensePayload(tensor.detach().flatten().float(), tuple(tensor.shape))

    with pytest.raises(fedgc.PluginError) as caught:
        fedgc.register_compressor(Lenient)
    assert str(caught.value).startswith("compressor 'lenient': Lenient.Options sets extra='ignore'")


# --- registration checks the interface and names the plugin --------------------------------------------

def test_a_compressor_without_compress_is_refused_at_registration():
    class NoCompress(fedgc.Compressor):
        name = "no_compress"

    with pytest.raises(fedgc.PluginError) as caught:
        fedgc.register_compressor(NoCompress)
    assert str(caught.value).startswith("compressor 'no_compress': NoCompress does not implement compress")


def test_an_aggregation_rule_without_aggregate_is_refused_at_registration():
    class NoAggregate(fedgc.Aggregator):
        name = "no_aggregate"

    with pytest.raises(fedgc.PluginError, match=r"^aggregator 'no_aggregate': NoAggregate does not implement aggregate"):
        fedgc.register_aggregator(NoAggregate)


def test_an_aggregation_rule_whose_options_are_no_pydantic_model_is_refused_at_registration():
    class DictOptions(fedgc.Aggregator):
        name = "dict_options"
        Options = dict

        def aggregate(self, updates, shapes, device):
            raise AssertionError("not run")

    with pytest.raises(fedgc.PluginError, match=r"^aggregator 'dict_options': DictOptions.Options must be a pydantic"):
        fedgc.register_aggregator(DictOptions)


def test_a_model_builder_that_returns_no_module_fails_the_run_in_one_line_naming_it():
    fedgc.register_model("pair", lambda shape, classes: (nn.Linear(int(np.prod(shape)), classes), None))
    with pytest.raises(fedgc.PluginError) as caught:
        fedgc.run({**TINY, "model": {"name": "pair"}})
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("model 'pair': its builder")
    assert str(caught.value).endswith("returned tuple, not a torch.nn.Module")


def test_a_data_set_function_that_returns_no_user_data_fails_the_run_in_one_line_naming_it():
    fedgc.register_dataset("not_data", lambda: (np.zeros((4, 2)), np.zeros(4)))
    with pytest.raises(fedgc.FedgcError) as caught:
        fedgc.run({**TINY, "data": {"dataset": "not_data", "num_clients": 2}})
    assert str(caught.value) == "dataset not_data: its loader returned tuple, not fedgc.UserData"


# --- a run that applied nothing -------------------------------------------------------------------------

def test_the_stopped_reason_of_a_run_that_applied_nothing_says_so():
    from fedgc.core.stop import NO_UPDATE_APPLIED, final_stopped_reason
    from fedgc.runs.metrics import RoundRecord

    failed = [RoundRecord(round=r, selected=2, failed=2) for r in (1, 2, 3)]
    reason = final_stopped_reason("completed", failed)
    assert reason == (f"{NO_UPDATE_APPLIED}: no update was applied in the whole run (3 rounds, 3 attempts: "
                      "6 selected, 6 failed; each client's reason in clients.jsonl)")
    assert final_stopped_reason("completed", [RoundRecord(round=1)]).endswith("(1 round, 1 attempt: no client was "
                                                                            "online; each client's reason in clients.jsonl)")
    one_applied = [*failed, RoundRecord(round=4, selected=2, completed=2, applied=2)]
    assert final_stopped_reason("completed", one_applied) == "completed"
    assert final_stopped_reason("interrupted", failed) == "interrupted"  # --resume may still apply updates
    assert final_stopped_reason("idle: no update applied in 3 consecutive attempts", failed).startswith("idle: ")


FAILING_COMPRESSOR = '''
import fedgc


class Broken(fedgc.Compressor):
    name = "broken"

    def compress(self, tensor, name, ctx):
        raise RuntimeError("this compressor cannot compress")
'''


def test_fedgc_run_of_a_run_that_applied_nothing_exits_non_zero_with_that_reason(tmp_path):
    """Every client fails on the user's compressor in each of 2 rounds (fewer than max_idle_rounds, so
    the run is not stopped as idle): the run ends no_update_applied, and ``fedgc run`` exits 3.
    Needs the round loop to end with ``fedgc.core.stop.final_stopped_reason`` (fedgc/flower/server/loop.py)."""
    (tmp_path / "byo_broken.py").write_text(FAILING_COMPRESSOR)
    (tmp_path / "s.yaml").write_text(
        "name: broken\nrounds: 2\ndata: {dataset: digits, num_clients: 2}\nmodel: {name: logreg}\n"
        "client: {local_steps: 1, batch_size: 8}\ncompression: {name: 'byo_broken:Broken'}\ncheckpoint_every: 0\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}
    done = subprocess.run([sys.executable, "-m", "fedgc", "run", "s.yaml", "--out", "out", "--quiet"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=240, check=False)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["updates_applied"] == 0 and summary["clients_failed"] == 4
    assert summary["stopped_reason"].startswith("no_update_applied: no update was applied in the whole run "
                                                "(2 rounds, 2 attempts: 4 selected, 4 failed;"), summary["stopped_reason"]
    assert done.returncode == 3, done.stderr[-2000:]
    assert "error: run stopped early (no_update_applied:" in done.stderr


# --- the API's argument errors are of the family --------------------------------------------------------

def test_a_bad_fmt_or_table_is_a_fedgc_error_naming_the_argument():
    run = fedgc.run({**TINY, "model": {"name": "logreg"}})
    for call, start in ((lambda: fedgc.table([run], fmt="xml"), "fmt must be md, csv or json, not 'xml'"),
                        (lambda: fedgc.Sweep([run]).table("html"), "fmt must be md, csv or json, not 'html'"),
                        (lambda: run.to_pandas("servers"), "table must be 'rounds' or 'clients', not 'servers'")):
        with pytest.raises(fedgc.FedgcError) as caught:
            call()
        assert str(caught.value) == start and isinstance(caught.value, ValueError)
        assert type(caught.value).__name__ == "ChoiceError"
