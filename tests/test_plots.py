"""Per-run plots, comparison overlays and the progress line: every file is written, non-empty, and a
real PNG, whatever the run looked like (no evaluated round, no upload, identical uploads, zero rounds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedgc.reports.plots import (
    COMPARE_PLOT_FILES,
    RUN_PLOT_FILES,
    RunSeries,
    accuracy_points,
    merge_attempts,
    plot_comparison,
    plot_run,
)
from fedgc.reports.plots.style import bytes_unit, time_unit
from fedgc.reports.progress import Progress, RunSoFar, progress_text
from fedgc.runs.metrics import RoundRecord
from fedgc.scenario.model import validate
from fedgc.sweeps.runner import run_point

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

TINY_WITH_CHURN = {
    "name": "tiny-plots", "seed": 3, "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"name": "mlp"},
    "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
    "compression": {"name": "topk", "density": 0.05},
    "network": {"profile": "3g", "availability": "exponential", "mean_on_s": 5.0, "mean_off_s": 2.0},
    "eval": {"target_accuracy": 0.5},
}


def assert_pngs(folder: Path, names: tuple[str, ...]) -> None:
    for name in names:
        path = folder / name
        assert path.is_file(), f"{name} not written"
        assert path.stat().st_size > 5_000, f"{name} is suspiciously small"
        assert path.read_bytes()[:8] == PNG_MAGIC, f"{name} is not a PNG"


def test_every_plot_is_written_for_a_tiny_run(tmp_path):
    run_point(validate(TINY_WITH_CHURN), tmp_path, quiet=True)
    assert_pngs(tmp_path / "plots", RUN_PLOT_FILES)
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(RUN_PLOT_FILES)


def record(n: int, **values) -> RoundRecord:
    return RoundRecord(round=n, sim_start_s=10.0 * (n - 1), sim_end_s=10.0 * n, round_duration_s=10.0, **values)


@pytest.mark.parametrize("rows", [
    pytest.param([], id="zero-rounds"),
    pytest.param([record(1, selected=3, cut=3), record(2, selected=3, late=2, failed=1)], id="no-upload-no-eval"),
    pytest.param([record(1, selected=4, completed=2, discarded=2, bytes_up=2000, client_upload_bytes=[1000, 1000],
                         client_upload_s=[0.5, 0.5])], id="over-selection-discards"),
    pytest.param([record(n, selected=2, completed=2, bytes_up=2000, accuracy=0.5, client_upload_bytes=[1000, 1000],
                         client_upload_s=[0.25, 0.25]) for n in (1, 2, 3)], id="identical-uploads"),
    pytest.param([record(n, selected=1, completed=1, bytes_up=5_000_000, accuracy=0.1 * n,
                         client_upload_bytes=[5_000_000], client_upload_s=[900.0 * n]) for n in range(1, 80)],
                 id="long-run-large-values"),
])
def test_every_plot_is_written_whatever_the_rows(tmp_path, rows):
    written = plot_run(rows, tmp_path, title="edge")
    assert [p.name for p in written] == list(RUN_PLOT_FILES)
    assert_pngs(tmp_path, RUN_PLOT_FILES)


def test_accuracy_points_accumulate_uploads_and_skip_unevaluated_rounds():
    rows = [record(1, bytes_up=100, accuracy=0.2), record(2, bytes_up=50), record(3, bytes_up=25, accuracy=0.4)]
    points = accuracy_points(rows)
    assert [(p.round, p.sim_time_s, p.uploaded_bytes, p.accuracy) for p in points] == [
        (1, 10.0, 100, 0.2), (3, 30.0, 175, 0.4)]


def test_a_retried_round_is_one_bar_adding_up_its_attempts():
    first = record(2, selected=4, completed=1, late=2, discarded=1, client_upload_bytes=[10], mean_upload_s=1.0)
    retry = record(2, selected=4, completed=3, discarded=1, client_upload_bytes=[11, 12, 13], mean_upload_s=3.0)
    merged = merge_attempts([record(1, selected=3, completed=3), first, retry])
    assert [r.round for r in merged] == [1, 2]
    assert (merged[1].round_duration_s, merged[1].completed, merged[1].late, merged[1].discarded) == (20.0, 4, 2, 2)
    assert merged[1].client_upload_bytes == [10, 11, 12, 13] and merged[1].mean_upload_s == 2.0


def test_comparison_overlays_are_written(tmp_path):
    a = RunSeries("a", accuracy_points([record(1, bytes_up=10, accuracy=0.3), record(2, bytes_up=10, accuracy=0.6)]),
                  target_accuracy=0.5)
    b = RunSeries("b", [], target_accuracy=0.5)
    written = plot_comparison([a, b], tmp_path)
    assert [p.name for p in written] == list(COMPARE_PLOT_FILES)
    assert_pngs(tmp_path, COMPARE_PLOT_FILES)


def test_units_fit_the_numbers():
    assert (time_unit(59).name, time_unit(600).name, time_unit(4 * 3600).name) == ("s", "min", "h")
    assert (bytes_unit(999).name, bytes_unit(2e3).name, bytes_unit(3e6).name) == ("B", "kB", "MB")


# The progress line (fedgc/reports/progress.py).

def test_progress_text_shows_time_accuracy_traffic_and_participation():
    so_far = RunSoFar()
    so_far.add(record(1, bytes_up=1_500_000, bytes_down=4_000_000, accuracy=0.8123, completed=4, cut=1, late=2,
                      failed=2))
    last = record(2, bytes_up=500_000, bytes_down=4_000_000, completed=3, discarded=2, failed=1)
    so_far.add(last)  # not evaluated: the last accuracy stays on the line
    text = progress_text(last, so_far)
    # discarded by over-selection apart from late; failed in the last round / over the run
    assert text == "sim 20.0s acc 81.2% up 2.00MB down 8.00MB ok 3 cut 0 late 0 disc 2 failed 1/3"
    long_run = record(500, completed=1)
    long_run.sim_end_s = 4 * 3600
    assert progress_text(long_run, RunSoFar(bytes_up=420_000)).startswith("sim 4.0h acc - up 0.420MB down 0.000MB")


def test_progress_is_silent_when_stderr_is_not_a_terminal(capsys):
    progress = Progress(rounds=2, enabled=True)  # pytest captures stderr: not a terminal
    progress.update(record(1, bytes_up=10, bytes_down=20, accuracy=0.5))
    progress.close()
    assert progress.bar is None and capsys.readouterr().err == ""
    assert progress.so_far.bytes_down == 20 and progress.last_accuracy == 0.5


def test_progress_totals_start_from_the_rounds_already_done():
    history = [record(1, bytes_up=100, bytes_down=1000, accuracy=0.4), record(2, bytes_up=100, bytes_down=1000)]
    progress = Progress(rounds=5, enabled=True, history=history)
    progress.update(record(3, bytes_up=50, bytes_down=1000), total_bytes_up=250)
    assert (progress.so_far.bytes_up, progress.so_far.bytes_down, progress.last_accuracy) == (250, 3000, 0.4)
