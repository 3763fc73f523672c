"""``--jobs N`` (fedgc/sweep_jobs.py): a sweep's points run in N processes and write the same rows as
one at a time; results come back in the sweep's order; the first failure stops the sweep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from fedgc.simulate import main
from fedgc.sweep_jobs import default_jobs, parse_jobs, run_all
from tests.test_sweep import TINY

SAME_FILES = ("scenario.yaml", "metrics.jsonl", "clients.jsonl", "model.pt")


def test_results_come_back_in_order_and_the_first_failure_is_raised():
    started = []
    assert run_all(math.factorial, [5, 1, 3], 2, started.append) == [120, 1, 6]
    assert started == [0, 1, 2]
    with pytest.raises(ValueError, match="factorial"):
        run_all(math.factorial, [3, -1, 2], 2)
    assert run_all(math.factorial, [4], 8) == [24]  # one task: no process started
    assert default_jobs() >= 1 and parse_jobs("3") == 3
    with pytest.raises(Exception, match="whole number"):
        parse_jobs("0")


def _sweep(tmp_path: Path, jobs: int, capsys) -> Path:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(TINY))
    out = tmp_path / f"jobs{jobs}"
    code = main([str(scenario), "--out", str(out), "--quiet", "--set", "rounds=2", "--jobs", str(jobs),
                 "--sweep", "compression.name=none,topk", "--seeds", "3,4"])
    assert code == 0, capsys.readouterr().err
    return out


@pytest.mark.slow
def test_a_sweep_with_jobs_2_writes_the_same_rows_as_with_jobs_1(tmp_path, capsys):
    serial, parallel = _sweep(tmp_path, 1, capsys), _sweep(tmp_path, 2, capsys)
    folders = sorted(p.name for p in serial.iterdir() if p.is_dir())
    assert len(folders) == 4 and folders == sorted(p.name for p in parallel.iterdir() if p.is_dir())
    for folder in folders:
        for name in SAME_FILES:
            assert (serial / folder / name).read_bytes() == (parallel / folder / name).read_bytes(), (folder, name)
        one, two = (json.loads((out / folder / "summary.json").read_text()) for out in (serial, parallel))
        assert {k: v for k, v in one.items() if "wall" not in k} == {k: v for k, v in two.items() if "wall" not in k}
    report = [(out / "report.md").read_text().replace(str(out), "OUT") for out in (serial, parallel)]
    assert report[0] == report[1]
