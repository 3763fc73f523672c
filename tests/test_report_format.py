"""How reports and plots show numbers (issue 27): three significant figures with a std to the mean's
last decimal place, the sample std, the target line and a bytes-up-plus-down view in every run's
plots, the overlays' bytes axis on a log scale, titles that count runs and lines in plain words."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest

from fedgc.reports.plots import overlays as compare_plots
from fedgc.reports.plots import run as run_plots
from fedgc.reports.plots.overlays import RunSeries, counted, plot_comparison
from fedgc.reports.plots.run import AccuracyPoint, accuracy_points, plot_run
from fedgc.reports.table import GroupRow, Stat, _cell, _number, _pct, _stat
from fedgc.runs.metrics import RoundRecord


def test_three_significant_figures_and_a_std_to_the_mean_s_last_place():
    assert [_number(v) for v in (0.42, 3.1, 17.34, 0.99999, 1052.3, 123456.7, 0.0)] == \
        ["0.420", "3.10", "17.3", "1.00", "1,052", "123,457", "0"]
    group = GroupRow(row=None, n=3, seeds=(0, 1, 2), stats={
        "time": Stat(17.34, 0.4567, 3), "mb": Stat(0.4213, 0.01234, 3), "acc": Stat(0.9123, 0.00456, 3),
        "same": Stat(12.0, 0.0, 3), "some": Stat(25.3, None, 1)})
    assert _cell(group, "time", _number) == "17.3 ± 0.5"
    assert _cell(group, "mb", _number) == "0.421 ± 0.012"
    assert _cell(group, "acc", _pct) == "91.2% ± 0.5%"
    assert _cell(group, "same", _number) == "12.0"  # all runs agree: no ±
    assert _cell(group, "some", _number) == "25.3 (1/3)"  # one run reached it: no std of one value


def test_the_std_is_the_sample_std():
    stat = _stat([1.0, 2.0, 3.0, None])
    assert (stat.mean, stat.std, stat.count) == (2.0, 1.0, 3)  # sqrt(2 / (3 - 1)); numpy.std would say 0.816
    assert _stat([5.0]).std is None


def rounds() -> list[RoundRecord]:
    return [RoundRecord(round=n, sim_end_s=10.0 * n, round_duration_s=10.0, bytes_up=1_000, bytes_down=9_000,
                        accuracy=0.3 * n, completed=1, selected=1) for n in (1, 2, 3)]


@pytest.fixture
def figures(monkeypatch):
    drawn = {}

    def keep(fig, path, **kwargs):
        drawn[path.name] = fig
        return path
    monkeypatch.setattr(run_plots, "save", keep)
    monkeypatch.setattr(compare_plots, "save", keep)
    return drawn


def test_every_run_plots_its_target_and_its_bytes_up_plus_down(tmp_path, figures):
    (tmp_path / "scenario.yaml").write_text("name: x\neval: {target_accuracy: 0.85}\n")
    plot_run(rounds(), tmp_path / "plots", title="x")  # the target from the run's scenario.yaml
    for name in ("accuracy_vs_time.png", "accuracy_vs_upload.png", "accuracy_vs_total_bytes.png"):
        labels = [line.get_label() for line in figures[name].axes[0].get_lines()]
        assert "target 85%" in labels, (name, labels)
    lines = {line.get_label(): line for line in figures["accuracy_vs_total_bytes.png"].axes[0].get_lines()}
    assert list(lines["up + down"].get_xdata()) == [10.0, 20.0, 30.0]  # kB: 10, 20, 30 thousand bytes both ways
    assert list(lines["up only"].get_xdata()) == [1.0, 2.0, 3.0]
    plot_run(rounds(), tmp_path / "other", title="x", target_accuracy=0.5)
    assert "target 50%" in [line.get_label() for line in figures["accuracy_vs_time.png"].axes[0].get_lines()]
    assert [p.total_bytes for p in accuracy_points(rounds())] == [10_000, 20_000, 30_000]


def test_the_overlays_bytes_axis_is_logarithmic_and_titles_count_in_words(tmp_path, figures):
    dense = RunSeries("dense", [AccuracyPoint(1, 10.0, 4_000_000, 0.5), AccuracyPoint(2, 20.0, 8_000_000, 0.8)], 0.9)
    dgc = RunSeries("dgc (mean ± std, n=2)", [AccuracyPoint(1, 12.0, 40_000, 0.4), AccuracyPoint(2, 24.0, 80_000, 0.7)],
                    0.9, [0.01, 0.02], runs=2)
    plot_comparison([dense, dgc], tmp_path)
    upload = figures["compare_accuracy_vs_upload.png"].axes[0]
    assert upload.get_xscale() == "log" and "log scale" in upload.get_xlabel()
    assert figures["compare_accuracy_vs_time.png"].axes[0].get_xscale() == "linear"
    assert upload.get_title() == "accuracy vs uploaded bytes (2 lines, 3 runs)"
    assert counted([dense]) == "1 run" and counted([dense, dense]) == "2 runs"
    assert counted([dgc]) == "1 line, 2 runs"
