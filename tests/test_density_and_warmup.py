"""``density`` is recorded only for compressors that read ``compression.density``, and the warm-up
applies only to the compressors listed in ``compression.warmup_for`` (default: dgc)."""

from __future__ import annotations

import pytest
import torch
import yaml

import fedgc.compress  # noqa: F401  (registers the compressors)
from fedgc.cli.run import main
from fedgc.compress.base import CompressionContext
from fedgc.compress.config import CompressionConfig
from fedgc.compress.registry import COMPRESSORS, DENSITY_COMPRESSORS, uses_density
from fedgc.compress.update import build_compression, compress_update
from fedgc.compress.warmup import recorded_density, scheduled_density
from fedgc.runs.engines import run_inline
from fedgc.runs.metrics import read_metrics
from fedgc.scenario.model import validate


def sent(name: str, density: float) -> torch.Tensor:
    """What the compressor sends for a fixed tensor at ``density`` (same random stream each time)."""
    compressor, memory = build_compression(CompressionConfig(name=name, density=density))
    update = {"w": torch.randn(64, 64, generator=torch.Generator().manual_seed(0))}
    ctx = CompressionContext(density=density, generator=torch.Generator().manual_seed(1), num_clients=2)
    compressed = compress_update(update, compressor, memory, ctx)
    return compressor.decompress(compressed.payloads["w"])


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_density_compressors_are_exactly_those_whose_output_depends_on_the_density(name):
    assert (not torch.equal(sent(name, 0.01), sent(name, 0.5))) == uses_density(name)


def test_density_schedule_warms_up_only_the_listed_compressors():
    dgc = CompressionConfig(name="dgc", density=0.01, warmup_rounds=5)
    topk = CompressionConfig(name="topk", density=0.01, warmup_rounds=5)
    topk_opted_in = CompressionConfig(name="topk", density=0.01, warmup_rounds=5, warmup_for=["dgc", "topk"])
    assert [scheduled_density(dgc, r) for r in (1, 2, 6)] == [0.25, 0.0625, 0.01]
    assert [scheduled_density(topk, r) for r in (1, 2, 6)] == [0.01, 0.01, 0.01]
    assert [scheduled_density(topk_opted_in, r) for r in (1, 2, 6)] == [0.25, 0.0625, 0.01]
    for name in ("none", "qsgd", "powersgd"):
        assert recorded_density(CompressionConfig(name=name, warmup_rounds=5), 1) is None


@pytest.mark.parametrize(("compression", "densities"), [
    ({"name": "none"}, [None, None]),
    ({"name": "qsgd", "density": 0.3}, [None, None]),
    ({"name": "topk", "density": 0.05, "warmup_rounds": 2}, [0.05, 0.05]),  # not warmed up: dgc only
    ({"name": "topk", "density": 0.05, "warmup_rounds": 2, "warmup_for": ["topk"]}, [0.25, 0.05]),
    ({"name": "dgc", "density": 0.05, "warmup_rounds": 2}, [0.25, 0.05]),  # stages 0 and 2
])
def test_metrics_record_the_density_only_where_it_is_used(tmp_path, tiny_scenario, compression, densities):
    run_inline(validate({**tiny_scenario, "compression": compression}), tmp_path, quiet=True)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["density"] for r in rows] == densities
    if compression["name"] == "none":
        assert all(r["achieved_density"] == 1.0 for r in rows)


def test_warmup_for_a_compressor_without_density_is_a_one_line_error(tmp_path, tiny_scenario, capsys):
    tree = {**tiny_scenario, "compression": {"name": "qsgd", "warmup_rounds": 3, "warmup_for": ["qsgd"]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tree))
    assert main([str(tmp_path / "s.yaml"), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "warmup_for" in err and "'qsgd' has no density" in err, err
    assert DENSITY_COMPRESSORS <= set(COMPRESSORS)
