"""Reading ``metrics.jsonl`` back (``fedgc report``, ``--tensorboard``, ``--resume``) costs microseconds a
row, whatever the size: one validator per record type, made once. And ``bench/metrics_read.py``, which
measures it at 10^4–10^6 rows, runs on a tiny setting and prints its figures' shape."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedgc.runs.metrics import read_rounds

BENCH = Path(__file__).resolve().parents[1] / "bench" / "metrics_read.py"
ROWS = 5_000


def test_reading_a_row_costs_about_what_parsing_its_json_costs(tmp_path, monkeypatch):
    """A validator built per line cost about 2.7 ms a row (13 s for these 5,000; 10^5 rows ran past 90 s),
    some 200 times ``json.loads`` of the line; one made once costs a few times ``json.loads``. The
    reference is timed in the same test, so the machine's load moves both alike."""
    monkeypatch.syspath_prepend(str(BENCH.parent))
    from metrics_read import row, write_run

    write_run(tmp_path / "run", ROWS)
    path = tmp_path / "run" / "metrics.jsonl"
    read_rounds(path, 10)  # the validators are built on first use: not what is compared
    started = time.perf_counter()
    parsed = [json.loads(line) for line in path.read_text().splitlines()]
    json_s = time.perf_counter() - started
    started = time.perf_counter()
    rows = read_rounds(path, ROWS)
    took = time.perf_counter() - started
    assert rows[0] == row(1) and rows[-1] == row(ROWS) and len(rows) == len(parsed) == ROWS
    assert took < 40 * json_s, f"{ROWS} rows read in {took:.2f} s, json.loads alone {json_s:.3f} s"


def test_the_bench_prints_rows_per_second_for_each_reader_and_size():
    done = subprocess.run([sys.executable, str(BENCH), "--rows", "20,200", "--events"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    readers = {"report", "tensorboard", "resume", "resume_rewrite"}
    try:
        import tensorboard  # noqa: F401
        readers.add("tensorboard_export")
    except ImportError:
        assert "the tensorboard package is not installed" in done.stderr
    assert figures["sizes"] == [20, 200] and figures["size_ratio"] == 10
    assert set(figures["rows_per_s"]) == set(figures["linearity"]) == readers
    for name in readers:
        assert set(figures["rows_per_s"][name]) == {"20", "200"}
        assert all(rate > 0 for rate in figures["rows_per_s"][name].values())
        assert figures["linearity"][name] > 0
    assert figures["written"]["200"]["bytes"] > 10 * figures["written"]["20"]["bytes"] * 0.9
    assert figures["peak_rss_mb"] > 0


@pytest.mark.parametrize("argv, message", [(["--rows", "ten"], "not comma-separated integers"),
                                           (["--rows", "0"], "sizes from 1 to 10^7")])
def test_the_bench_refuses_bad_sizes_in_one_line(argv, message):
    done = subprocess.run([sys.executable, str(BENCH), *argv], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
