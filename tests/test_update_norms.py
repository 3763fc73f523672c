"""With ``client.report_norms`` the clients report their round update's L2 norm before and after the
compressor's local clipping (DGC's ``clip_norm``, scaled by N^-1/2), so the clipping can be read from
the run's own files: per client in ``clients.jsonl``, per round in ``metrics.jsonl``. Without it the
messages carry nothing more than before."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from flwr.app import MetricRecord

from fedgc.compress.base import CompressionContext
from fedgc.compress.config import CompressionConfig
from fedgc.compress.update import build_compression, compress_update, global_norm
from fedgc.flower import keys
from fedgc.flower.client.client_app import app as fedgc_app
from fedgc.flower.client_config import client_config_record, read_client_config
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.loop import run_rounds
from fedgc.flower.server.validate import reported_norms
from fedgc.scenario.model import validate
from fedgc.wire.codec import CodecError


def update(scale: float) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return {"w": scale * torch.randn(40, 30, generator=g), "b": scale * torch.randn(30, generator=g)}


def compressed(config: CompressionConfig, delta, num_clients: int = 4):
    compressor, memory = build_compression(config)
    ctx = CompressionContext(round=1, density=0.01, generator=torch.Generator().manual_seed(0), num_clients=num_clients)
    return compress_update(delta, compressor, memory, ctx, norms=True)


@pytest.mark.parametrize("scale", [0.01, 10.0])
def test_dgc_reports_the_norm_it_clipped_from_and_the_norm_it_clipped_to(scale):
    delta = update(scale)
    out = compressed(CompressionConfig(name="dgc", density=0.01, clip_norm=2.0), delta, num_clients=4)
    norm = math.sqrt(sum(float(t.square().sum()) for t in delta.values()))
    assert out.norm_before_clip == pytest.approx(norm, rel=1e-5)
    threshold = 2.0 / math.sqrt(4)  # the paper's N^-1/2 scaling of the threshold
    assert out.norm_after_clip == pytest.approx(min(norm, threshold), rel=1e-5)


def test_a_compressor_that_clips_nothing_reports_the_same_norm_twice():
    out = compressed(CompressionConfig(name="topk", density=0.01), update(10.0))
    assert out.norm_before_clip == out.norm_after_clip == pytest.approx(global_norm(update(10.0)))


def scenario(report: bool):
    return validate({"name": "norms", "seed": 1, "rounds": 3,
                     "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
                     "model": {"name": "mlp"}, "client": {"local_steps": 2, "batch_size": 8, "lr": 0.5,
                                                          "report_norms": report},
                     "compression": {"name": "dgc", "density": 0.05, "clip_norm": 0.5, "warmup_rounds": 0},
                     "network": {"profile": "ideal"}})


def test_the_option_travels_in_the_client_config_only_when_set():
    assert keys.CC_REPORT_NORMS not in client_config_record(scenario(False), (64,), 10)
    record = client_config_record(scenario(True), (64,), 10)
    assert record[keys.CC_REPORT_NORMS] is True
    assert read_client_config(record).report_norms is True


def run(tmp_path, report: bool):
    s = scenario(report)
    torch.manual_seed(0)
    run_rounds(InlineGrid.for_scenario(s, fedgc_app), s, tmp_path)
    rounds = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    clients = [json.loads(line) for line in (tmp_path / "clients.jsonl").read_text().splitlines()]
    return rounds, clients


def test_each_round_row_summarises_its_clients_norms(tmp_path):
    rounds, clients = run(tmp_path, report=True)
    for row in rounds:
        mine = [c for c in clients if c["round"] == row["round"] and c["outcome"] == "applied"]
        before = sorted(c["norm_before_clip"] for c in mine)
        after = sorted(c["norm_after_clip"] for c in mine)
        assert len(before) == row["applied"] == 4
        assert row["norm_before_clip_max"] == before[-1]
        assert row["norm_before_clip_median"] == pytest.approx((before[1] + before[2]) / 2)
        assert row["norm_after_clip_median"] == pytest.approx((after[1] + after[2]) / 2)
        # DGC clips at 0.5 / sqrt(4) = 0.25 per client: every update above it is scaled down to it.
        assert row["locally_clipped"] == sum(b > 0.25 for b in before)
        assert all(a == pytest.approx(min(b, 0.25), rel=1e-4) for b, a in zip(
            [c["norm_before_clip"] for c in mine], [c["norm_after_clip"] for c in mine]))
    assert sum(r["locally_clipped"] for r in rounds) > 0


def test_without_the_option_nothing_is_reported_and_the_uploads_are_smaller(tmp_path):
    plain, plain_clients = run(tmp_path / "plain", report=False)
    reported, _ = run(tmp_path / "reported", report=True)
    assert all(r["norm_before_clip_median"] is None and r["locally_clipped"] is None for r in plain)
    assert all(c["norm_before_clip"] is None for c in plain_clients)
    # Training is the same; each reply carries two more numbers, each message one more key.
    assert [r["train_loss"] for r in plain] == [r["train_loss"] for r in reported]
    assert all(p["bytes_up"] < r["bytes_up"] for p, r in zip(plain, reported))


@pytest.mark.parametrize("metrics, reason", [
    ({keys.NORM_BEFORE_CLIP: float("inf"), keys.NORM_AFTER_CLIP: 1.0}, "is not a finite number"),
    ({keys.NORM_BEFORE_CLIP: [1.0, 2.0], keys.NORM_AFTER_CLIP: 1.0}, "is not a finite number"),
    ({keys.NORM_AFTER_CLIP: 1.0}, "is not a finite number"),
    ({keys.NORM_BEFORE_CLIP: 1.0, keys.NORM_AFTER_CLIP: 1.5}, "is more than"),
])
def test_a_reported_norm_that_cannot_be_is_refused(metrics, reason):
    with pytest.raises(CodecError, match=reason) as err:
        reported_norms(MetricRecord(metrics))
    assert err.value.reason == "bad-metrics"


def test_no_report_is_none_and_a_true_one_is_kept():
    assert reported_norms(MetricRecord({})) is None
    assert reported_norms(MetricRecord({keys.NORM_BEFORE_CLIP: 2.0, keys.NORM_AFTER_CLIP: 0.25})) == (2.0, 0.25)


def test_the_norms_bench_reads_them_back_per_block_of_rounds(tmp_path):
    run(tmp_path / "run", report=True)
    bench = Path(__file__).resolve().parents[1] / "bench" / "update_norms.py"
    done = subprocess.run([sys.executable, str(bench), str(tmp_path / "run"), "--blocks", "3"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])["run"]
    clients = [json.loads(line) for line in (tmp_path / "run" / "clients.jsonl").read_text().splitlines()]
    assert [b["rounds"] for b in summary["blocks"]] == [[1, 1], [2, 2], [3, 3]]
    for block in summary["blocks"]:
        mine = [c for c in clients if c["round"] == block["rounds"][0]]
        assert block["updates"] == 4 and block["max"] == max(c["norm_before_clip"] for c in mine)
        assert block["clipped_share"] == sum(c["norm_after_clip"] < c["norm_before_clip"] * (1 - 1e-6)
                                             for c in mine) / 4
    run(tmp_path / "plain", report=False)
    plain = subprocess.run([sys.executable, str(bench), str(tmp_path / "plain")], capture_output=True, text=True,
                           timeout=120, check=False)
    assert plain.returncode == 2 and "client.report_norms=true" in plain.stderr and "Traceback" not in plain.stderr
