"""The inline engine end to end: a real ClientApp and ServerApp strategy, real Flower serialization,
real simpy network, real PyTorch training."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

from fedgc.flower.client.client_app import app as client_app
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.loop import run_rounds
from fedgc.flower.setup import SCENARIO_YAML
from fedgc.runs.engines import run_inline
from fedgc.scenario.model import dump_scenario, validate

SUMMARY_KEYS = {"rounds", "final_accuracy", "best_accuracy", "sim_time_s", "wall_time_s", "bytes_up", "bytes_down",
                "dense_bytes_up", "compression_ratio_up", "target_accuracy", "time_to_target_s", "clients_completed",
                "clients_dropped", "updates_rejected"}


def test_two_rounds_write_every_output(tmp_path, tiny_scenario):
    summary = run_inline(validate(tiny_scenario), tmp_path, quiet=True)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(written)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2]
    assert all(r["completed"] == 4 and r["applied"] == 4 for r in rows)
    assert summary.sim_time_s > 0 and summary.bytes_up > 0 and summary.bytes_down > summary.bytes_up
    assert summary.compression_ratio_up > 1.0
    assert (tmp_path / "plots" / "accuracy_vs_time.png").stat().st_size > 0
    assert (tmp_path / "plots" / "accuracy_vs_upload.png").stat().st_size > 0
    assert 0.0 <= written["final_accuracy"] <= 1.0


@pytest.mark.slow
def test_same_seed_same_metrics(tmp_path, tiny_scenario):
    tiny_scenario["strategy"]["fraction"] = 0.5
    run_inline(validate(tiny_scenario), tmp_path / "a", quiet=True)
    run_inline(validate(tiny_scenario), tmp_path / "b", quiet=True)
    a = (tmp_path / "a" / "metrics.jsonl").read_bytes()
    assert a == (tmp_path / "b" / "metrics.jsonl").read_bytes()
    tiny_scenario["seed"] += 1
    run_inline(validate(tiny_scenario), tmp_path / "c", quiet=True)
    assert a != (tmp_path / "c" / "metrics.jsonl").read_bytes()


@pytest.mark.slow
def test_topk_at_full_density_is_dense_fedavg(tmp_path, tiny_scenario):
    tiny_scenario["compression"] = {"name": "topk", "density": 1.0, "error_feedback": True}
    run_inline(validate(tiny_scenario), tmp_path / "topk", quiet=True)
    tiny_scenario["compression"] = {"name": "none", "error_feedback": False}
    run_inline(validate(tiny_scenario), tmp_path / "none", quiet=True)
    topk = torch.load(tmp_path / "topk" / "model.pt")
    dense = torch.load(tmp_path / "none" / "model.pt")
    initial_changed = False
    for name in dense:
        assert torch.equal(topk[name], dense[name]), name
    from fedgc.models import build_model

    fresh = build_model("mlp", (1, 8, 8), 10, tiny_scenario["seed"]).state_dict()
    initial_changed = any(not torch.equal(fresh[n], dense[n]) for n in dense)
    assert initial_changed  # training really happened


class RecordingGrid(InlineGrid):
    """The real inline grid, keeping every reply it delivered to the server."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.delivered = []

    def pull_messages(self, message_ids):
        replies = list(super().pull_messages(message_ids))
        self.delivered.extend(replies)
        return replies


def serialized_size(message) -> int:
    return sum(len(obj.deflate()) for obj in get_all_nested_objects(message).values())


def test_byte_counts_are_serialized_message_sizes(tmp_path, tiny_scenario):
    scenario = validate(tiny_scenario)
    grid = RecordingGrid(client_app, scenario.data.num_clients, {SCENARIO_YAML: dump_scenario(scenario)})
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    summary = run_rounds(grid, scenario, tmp_path)
    assert len(grid.delivered) == 8
    assert summary.bytes_up == sum(serialized_size(m) for m in grid.delivered)
    # Every client downloads the same global model message each round (4 clients, 2 rounds).
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(r["bytes_down"] % 4 == 0 for r in rows)
    assert summary.bytes_down > 4 * 2 * 4 * sum(p.numel() for p in torch.load(tmp_path / "model.pt").values())


def test_clients_over_selection_discards_are_not_dropouts(tmp_path, tiny_scenario):
    tiny_scenario["strategy"]["fraction"] = 0.5
    tiny_scenario["network"] = {"profile": "lte", "over_selection": 2.0}  # select 4, keep the first 2
    scenario = validate(tiny_scenario)
    summary = run_inline(scenario, tmp_path, quiet=True)
    (tmp_path / "scenario.yaml").write_text(dump_scenario(scenario))  # what the CLI writes: report reads it
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all((r["selected"], r["completed"], r["discarded"], r["late"], r["cut"]) == (4, 2, 2, 0, 0) for r in rows)
    assert (summary.clients_dropped, summary.clients_discarded) == (0, 4)
    from fedgc.reports.run_reports import read_run, render, report_row

    row = report_row(read_run(tmp_path))
    assert (row.dropouts, row.discarded) == (0, 4)
    header, _, cells = render([row], "md").splitlines()[:3]
    columns = dict(zip(header.split(" | "), cells.split(" | ")))
    assert (columns["dropouts"], columns["discarded"]) == ("0", "4")


THREADS_SCENARIO = """\
name: threads
seed: 3
rounds: 3
checkpoint_every: 0
data: {dataset: digits, num_clients: 4, partition: dirichlet, alpha: 1.0}
model: {name: small_cnn}
client: {local_steps: 5, batch_size: 16, lr: 0.1}
compression: {name: dgc, density: 0.05, warmup_rounds: 2}
strategy: {fraction: 0.5}
network: {profile: 3g}
"""


def simulate_with_env(tmp_path, name: str, **env: str) -> subprocess.CompletedProcess:
    scenario = tmp_path / "threads.yaml"
    scenario.write_text(THREADS_SCENARIO)
    environment = {k: v for k, v in os.environ.items() if k != "FEDGC_THREADS"} | env
    return subprocess.run([sys.executable, "-m", "fedgc.cli.run", str(scenario), "--quiet", "--out",
                           str(tmp_path / name)], env=environment, capture_output=True, text=True, timeout=300,
                          check=False)


@pytest.mark.slow
def test_metrics_do_not_depend_on_the_thread_count_of_the_environment(tmp_path):
    for threads in ("1", "2"):
        done = simulate_with_env(tmp_path, f"omp{threads}", OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        assert done.returncode == 0, done.stderr[-2000:]
    one, two = ((tmp_path / f"omp{t}" / "metrics.jsonl").read_bytes() for t in ("1", "2"))
    assert one == two


@pytest.mark.slow
def test_a_bad_thread_setting_is_a_one_line_error(tmp_path):
    done = simulate_with_env(tmp_path, "bad", FEDGC_THREADS="many")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: FEDGC_THREADS='many': expected a whole number of threads from 1 to 1024"]
