"""A run folder's records are data, whichever section names a plugin (docs/api.md, "Running"): a folder
whose ``downlink.name`` is a compressor registered from Python reads in a process that never registered
it — ``load_run``, ``load_sweep``, ``fedgc.report`` — as one whose ``compression.name`` is, its section
kept as written and the name listed in ``unchecked_plugins``. The run itself compresses its downloads
with the user's compressor (``fedgc/compress/downlink.py``: the stateless built-ins and any user's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fedgc
from fedgc.scenario.model import dump_scenario

pytestmark = pytest.mark.usefixtures("isolated_registries")

REPO = Path(__file__).resolve().parents[1]

READ_SCRIPT = '''
import json
import sys

import fedgc

out = sys.argv[1]
try:
    run = fedgc.load_run(out + "/sweep/seed=0")
    sweep = fedgc.load_sweep(out + "/sweep")
    report = fedgc.report([out + "/sweep"])
except fedgc.FedgcError as err:
    print(json.dumps({"error": type(err).__name__, "message": str(err)}))
    raise SystemExit(0)
print(json.dumps({"rounds": len(run.rounds), "unchecked": list(run.scenario.unchecked_plugins),
                  "downlink": run.scenario.downlink.model_dump(mode="json"),
                  "sweep": [r.summary.bytes_down for r in sweep.runs], "report": "bytes" in report}))
'''


def _tenth_topk() -> type:
    import torch

    class TenthTopK(fedgc.Compressor):
        name = "tenth_topk_down"

        def compress(self, tensor, name, ctx):  # type: ignore[no-untyped-def]
            flat = tensor.detach().flatten().float()
            keep = torch.topk(flat.abs(), max(1, flat.numel() // 10)).indices.sort().values
            return fedgc.SparsePayload(keep, flat[keep], tuple(tensor.shape))

    return TenthTopK


def test_a_folder_naming_a_python_registered_downlink_compressor_reads_in_a_new_process(tmp_path):
    fedgc.register_compressor(_tenth_topk())
    scenario = fedgc.Scenario.build(name="down", rounds=2, data={"dataset": "digits", "num_clients": 2},
                                    downlink={"name": "tenth_topk_down", "density": 0.1, "value_dtype": "fp16"},
                                    client={"local_steps": 2, "batch_size": 16}, checkpoint_every=0)
    swept = fedgc.sweep(scenario, seeds=[0], out=tmp_path / "sweep")
    written = tmp_path / "sweep" / "seed=0" / "scenario.yaml"
    assert "downlink:\n  name: tenth_topk_down\n" in written.read_text()
    first = swept.runs[0].rounds[0]  # a dense download is about a dense upload (2 clients, same model)
    assert 0 < first.bytes_down < first.dense_bytes_up / 3  # a tenth of the entries, fp16, from round 1

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", READ_SCRIPT, str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in read, read
    assert read["rounds"] == 2 and read["report"]
    assert read["unchecked"] == ["compressor tenth_topk_down"]
    assert read["downlink"] == {"name": "tenth_topk_down", "density": 0.1, "value_dtype": "fp16",
                                "dense_small_tensors": True}
    assert read["sweep"] == [r.summary.bytes_down for r in swept.runs]

    # In the process that registered it, too: reading checks the name only, whatever the section.
    again = fedgc.load_run(tmp_path / "sweep" / "seed=0")
    assert again.scenario.unchecked_plugins == ("compressor tenth_topk_down",)
    assert again.scenario.downlink.name == "tenth_topk_down"
    assert "name: tenth_topk_down" in dump_scenario(again.scenario)
