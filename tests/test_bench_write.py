"""The benches that keep a block of docs/results.md rewrite it only with ``--write`` (issue 27):
without it they print their figures and leave docs/results.md and its plot alone."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))

    def load(name: str):
        sys.modules.pop(name, None)
        return importlib.import_module(name)
    return load


@pytest.mark.parametrize("name", ["mcmahan_cnn", "mobile_time_to_target"])
def test_results_md_is_written_only_with_write(bench, monkeypatch, tmp_path, capsys, name):
    module = bench(name)
    written = []
    monkeypatch.setattr(module, "write_results", lambda *args: written.append(args[-1]))
    monkeypatch.setattr(module, "figures", lambda *args: {})
    if name == "mcmahan_cnn":
        monkeypatch.setattr(module, "run", lambda *args: None)
    else:
        monkeypatch.setattr(module, "run_one", lambda *args: {})
        monkeypatch.setattr(module, "plot", lambda *args: written.append("plot"))
    results = tmp_path / "results.md"
    argv = ["--out", str(tmp_path / "runs"), "--results", str(results)]
    assert module.main(argv) == 0 and written == []
    assert module.main([*argv, "--no-write"]) == 0 and written == []  # the old spelling: still nothing written
    assert module.main([*argv, "--write"]) == 0 and results in written
    assert capsys.readouterr().out.strip().endswith("}")  # the figures are printed either way


def test_the_dgc_mnist_bench_writes_results_md_only_with_write(bench, monkeypatch, tmp_path):
    module = bench("dgc_mnist")
    written = []
    monkeypatch.setattr(module, "write_results", lambda *args: written.append(args[-1]))
    row = dict.fromkeys(("final_accuracy", "mean_last3_accuracy", "early_accuracy", "bytes_up",
                         "compression_ratio_up", "ratio_after_warmup", "wall_time_s"), 1.0)
    monkeypatch.setattr(module, "run_variant", lambda name, *args: dict(row))
    results = tmp_path / "results.md"
    argv = ["--out", str(tmp_path / "runs"), "--results", str(results)]
    assert module.main(argv) == 0 and written == []
    assert module.main([*argv, "--no-write"]) == 0 and written == []
    assert module.main([*argv, "--write"]) == 0 and written == [results]
