"""The same app on Flower's simulation runtime (Ray, via a local SuperLink and ``flwr run``) and on the
inline engine: same selection, same training, same aggregation, same metrics.

What may differ, and why: Flower's runtime gives runs and nodes random 64-bit ids and messages UUIDs
where the inline engine uses small counters, and those ids are part of every message's metadata on
the wire. So each message's wire size may differ by a few tens of bytes (measured: +25 per model
download, +44 per compressed reply; bound ``ID_BYTES_PER_MESSAGE``), and the simulated transfer times
by what those bytes take on the link (``TIME_RTOL``, relative to small compressed uploads). Everything
computed from the models (accuracy, loss, train loss, density, selection, counts) must be identical.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import tomllib

from fedgc.engines import run_flower, run_inline
from fedgc.scenario import validate

from .conftest import REPO

ID_BYTES_PER_MESSAGE = 64
TIME_RTOL = 0.02  # 64 bytes on a ~4 kB compressed upload: under 2 % of its transfer time
BYTE_KEYS = {"bytes_down": "selected", "bytes_up": "completed", "dense_bytes_up": "completed"}
TIME_KEYS = {"sim_start_s", "sim_end_s", "round_duration_s", "mean_download_s", "mean_compute_s",
             "mean_upload_s", "max_upload_s", "client_upload_s"}


def _rows(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def _close_times(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_close_times(x, y) for x, y in zip(a, b))
    return a is not None and b is not None and math.isclose(a, b, rel_tol=TIME_RTOL)


def differences(inline_rows: list[dict], flower_rows: list[dict]) -> list[str]:
    """Every difference beyond the stated tolerances, as readable lines."""
    problems = []
    for a, b in zip(inline_rows, flower_rows, strict=True):
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key), b.get(key)
            if x == y:
                continue
            if key in BYTE_KEYS and abs(x - y) <= ID_BYTES_PER_MESSAGE * a[BYTE_KEYS[key]]:
                continue
            if key == "client_upload_bytes" and len(x) == len(y) and all(
                    abs(p - q) <= ID_BYTES_PER_MESSAGE for p, q in zip(x, y)):
                continue
            if key in TIME_KEYS and _close_times(x, y):
                continue
            problems.append(f"round {a['round']} {key}: inline {x!r} flower {y!r}")
    return problems


@pytest.mark.parametrize("downlink", [
    {"name": "none"},
    {"name": "topk", "density": 0.05},  # compressed downloads: Flower's runtime keeps each node's replica
])
def test_flower_simulation_runtime_matches_inline(tmp_path, tiny_scenario, downlink):
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    tiny_scenario["compression"] = {"name": "dgc", "density": 0.05, "momentum": 0.9, "warmup_rounds": 1}
    tiny_scenario["strategy"]["fraction"] = 0.5  # seeded selection must pick the same partitions
    tiny_scenario["rounds"] = 3
    tiny_scenario["downlink"] = downlink
    scenario = validate(tiny_scenario)
    inline = run_inline(scenario, tmp_path / "inline", quiet=True)
    flower = run_flower(scenario, tmp_path / "flower", quiet=True)
    inline_rows, flower_rows = _rows(tmp_path / "inline"), _rows(tmp_path / "flower")
    assert [r["round"] for r in flower_rows] == [1, 2, 3]
    assert all(r["completed"] == 2 and r["applied"] == 2 and r["failed"] == 0 for r in flower_rows)
    assert differences(inline_rows, flower_rows) == []
    assert flower.final_accuracy == inline.final_accuracy
    assert flower.updates_applied == inline.updates_applied == 6
    assert (tmp_path / "flower" / "model.pt").stat().st_size > 0


def test_flower_engine_without_ray_is_a_one_line_error(tmp_path):
    """Ray made unimportable the way Python documents it (``sys.modules['ray'] = None``)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nrounds: 1\nengine: flower\ndata: {dataset: digits, num_clients: 2}\n"
                        "model: {name: mlp}\n")
    code = ("import sys; sys.modules['ray'] = None; from fedgc.simulate import main; "
            f"sys.exit(main([{str(scenario)!r}, '--out', {str(tmp_path / 'out')!r}, '--quiet']))")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: engine 'flower' needs Ray, which is not installed: pip install 'fedgc[ray]'"]


def test_generated_app_names_the_same_components_and_config_keys():
    from fedgc.flower.flower_engine import APP_PYPROJECT

    ours = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["flwr"]
    generated = tomllib.loads(APP_PYPROJECT)["tool"]["flwr"]
    assert generated["app"]["components"] == ours["app"]["components"]
    assert set(generated["app"]["config"]) == set(ours["app"]["config"])
    assert "federations" not in ours  # `flwr run` would rewrite pyproject.toml (Flower 1.41 migration)


def test_partition_grid_labels_nodes_by_partition(tiny_scenario):
    """The census on the inline grid: node n holds partition n - 1, so labels are the ids themselves."""
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.supercore.task_identity import TaskIdentity

    from fedgc.flower.client_app import app
    from fedgc.flower.inline_grid import InlineGrid
    from fedgc.flower.partition_grid import PartitionGrid
    from fedgc.flower.setup import SCENARIO_YAML
    from fedgc.scenario import dump_scenario

    grid = InlineGrid(app, 4, {SCENARIO_YAML: dump_scenario(validate(tiny_scenario))})
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, grid.run.run_id, SUPERLINK_NODE_ID
    partitioned = PartitionGrid.census(grid, expected=4, wait_s=10)
    assert partitioned.label_of == {1: 1, 2: 2, 3: 3, 4: 4}
    assert list(partitioned.get_node_ids()) == [1, 2, 3, 4]
    probe = Message(RecordDict({"c": ConfigRecord({})}), dst_node_id=3, message_type="query.partition")
    (reply,) = partitioned.send_and_receive([probe])
    assert reply.metadata.src_node_id == 3
    assert reply.content.metric_records["partition"]["partition-id"] == 2
