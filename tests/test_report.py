"""``python -m fedgc report``: the comparison table's values are the runs' own summaries, in every
format; bad run folders are one-line errors with exit code 2."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedgc.reports.plots import COMPARE_PLOT_FILES
from fedgc.reports.run_reports import main, read_runs, unique_labels
from fedgc.scenario.model import validate
from fedgc.sweeps.runner import run_point


def tiny(name: str, compressor: dict) -> dict:
    return {"name": name, "seed": 5, "rounds": 2,
            "data": {"dataset": "digits", "num_clients": 3, "partition": "iid"},
            "model": {"name": "mlp"}, "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
            "compression": compressor, "network": {"profile": "lte"}, "eval": {"target_accuracy": 0.15}}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    runs = [root / "dense", root / "topk"]
    run_point(validate(tiny("dense", {"name": "none", "error_feedback": False})), runs[0])
    run_point(validate(tiny("sparse", {"name": "topk", "density": 0.05})), runs[1])
    return runs


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def report(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_values_are_the_summaries(capsys, two_runs):
    code, out, err = report(capsys, *two_runs, "--format", "json")
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert [r["run"] for r in rows] == ["dense", "topk"]
    assert [r["compressor"] for r in rows] == ["none", "topk"]
    for row, run in zip(rows, two_runs):
        s = summary(run)
        for key in ("name", "rounds", "final_accuracy", "best_accuracy", "target_accuracy", "time_to_target_s",
                    "rounds_to_target", "sim_time_s", "bytes_up", "bytes_down", "compression_ratio_up"):
            assert row[key] == s[key], key
        assert row["mb_up"] == s["bytes_up"] / 1e6 and row["mb_down"] == s["bytes_down"] / 1e6
        assert (row["dropouts"], row["failed"], row["rejected"]) == (
            s["clients_dropped"], s["clients_failed"], s["updates_rejected"])
    assert rows[1]["compression_ratio_up"] > 1.5 > rows[0]["compression_ratio_up"]


def test_csv_has_the_same_values_as_json(capsys, two_runs):
    _, as_json, _ = report(capsys, *two_runs, "--format", "json")
    code, as_csv, _ = report(capsys, *two_runs, "--format", "csv")
    assert code == 0
    parsed = list(csv.DictReader(io.StringIO(as_csv)))
    for csv_row, json_row in zip(parsed, json.loads(as_json), strict=True):
        assert set(csv_row) == set(json_row)
        for key, value in json_row.items():
            assert csv_row[key] == ("" if value is None else str(value)), key


def markdown_rows(text: str) -> list[dict[str, str]]:
    table = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in table[2:]]


def sig3(value: float) -> str:
    """Three significant figures, as the report shows numbers (0.420, 3.10, 17.3, 1,052)."""
    rounded = float(f"{value:.3g}")
    places = max(0, 2 - math.floor(math.log10(abs(rounded)))) if rounded else 0
    return f"{value:,.{places}f}"


def test_markdown_table_shows_the_summaries(capsys, two_runs):
    code, out, _ = report(capsys, *two_runs)
    assert code == 0
    rows = markdown_rows(out)
    assert [r["run"] for r in rows] == ["dense", "topk"]
    for row, run in zip(rows, two_runs):
        s = summary(run)
        assert row["final acc"] == f"{s['final_accuracy'] * 100:.1f}%"
        assert row["best acc"] == f"{s['best_accuracy'] * 100:.1f}%"
        assert row["target"] == "15.0%"
        assert row["time to target (s)"] == ("—" if s["time_to_target_s"] is None else sig3(s["time_to_target_s"]))
        assert row["rounds to target"] == ("—" if s["rounds_to_target"] is None else str(s["rounds_to_target"]))
        assert row["MB up"] == sig3(s["bytes_up"] / 1e6) and row["MB down"] == sig3(s["bytes_down"] / 1e6)
        assert row["compression ratio"] == sig3(s["compression_ratio_up"]) + "×"
        assert row["dropouts"] == str(s["clients_dropped"]) and row["rejected"] == str(s["updates_rejected"])


def test_out_writes_the_report_and_the_overlays(capsys, two_runs, tmp_path):
    code, out, _ = report(capsys, *two_runs, "--out", tmp_path / "cmp")
    assert code == 0
    written = (tmp_path / "cmp" / "report.md").read_text()
    assert markdown_rows(written) == markdown_rows(out)
    for name in COMPARE_PLOT_FILES:
        assert (tmp_path / "cmp" / name).stat().st_size > 5_000
        assert f"]({name})" in written
    assert report(capsys, *two_runs, "--out", tmp_path / "cmp", "--format", "csv")[0] == 0
    assert (tmp_path / "cmp" / "report.csv").read_text().startswith("run,path,name,")


def test_a_run_that_stopped_early_is_marked(capsys, two_runs, tmp_path):
    stopped = tmp_path / "stopped"
    shutil.copytree(two_runs[0], stopped)
    data = summary(stopped)
    data["stopped_reason"] = "diverged: non-finite model"
    (stopped / "summary.json").write_text(json.dumps(data))
    _, out, _ = report(capsys, stopped)
    assert markdown_rows(out)[0]["run"] == "stopped †"
    assert "† stopped: stopped early (diverged: non-finite model)." in out


@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_non_finite_accuracies_are_left_out_of_the_plots(capsys, two_runs, tmp_path, value):
    """A hand-edited metrics.jsonl whose every accuracy is NaN (fedgc itself writes null) still gets its
    report and overlays: the rounds are no points on the curves, never a matplotlib traceback."""
    run = tmp_path / "nan"
    shutil.copytree(two_runs[0], run)
    metrics = run / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    metrics.write_text("".join(json.dumps({**row, "accuracy": float(value)}) + "\n" for row in rows))
    assert value in metrics.read_text()
    code, out, err = report(capsys, run, "--out", tmp_path / "cmp")
    assert code == 0 and err == "" and markdown_rows(out)[0]["run"] == "nan"
    for name in COMPARE_PLOT_FILES:
        assert (tmp_path / "cmp" / name).stat().st_size > 5_000


def break_summary(run: Path, text: str) -> None:
    (run / "summary.json").write_text(text)


@pytest.mark.parametrize("damage, message", [
    (lambda run: shutil.rmtree(run), "no such run folder"),
    (lambda run: (shutil.rmtree(run), run.write_text("x")), "not a folder"),
    (lambda run: (run / "summary.json").unlink(), "not a run folder (no summary.json)"),
    (lambda run: (run / "metrics.jsonl").unlink(), "not a run folder (no metrics.jsonl)"),
    (lambda run: (run / "scenario.yaml").unlink(), "not a run folder (no scenario.yaml)"),
    (lambda run: break_summary(run, "{not json"), "summary.json: invalid JSON"),
    (lambda run: break_summary(run, "[1, 2]"), "summary.json: expected a JSON object"),
    (lambda run: break_summary(run, '{"name": "x"}'), "summary.json: missing key 'rounds'"),
    (lambda run: break_summary(run, (run / "summary.json").read_text().replace('"rounds": 2', '"rounds": "2"')),
     "summary.json: key 'rounds' has the wrong type (str)"),
    (lambda run: (run / "metrics.jsonl").write_text('{"round": 1}\n{oops\n'), "metrics.jsonl line 2: invalid JSON"),
    (lambda run: (run / "scenario.yaml").write_text("a: [b"), "scenario.yaml: invalid YAML"),
])
def test_a_bad_run_folder_is_one_line_and_exit_2(capsys, two_runs, tmp_path, damage, message):
    run = tmp_path / "run"
    shutil.copytree(two_runs[0], run)
    damage(run)
    code, out, err = report(capsys, two_runs[1], run)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: RUN_DIR"),
    (["RUN", "--format", "xml"], "invalid choice: 'xml'"),
    (["RUN", "RUN"], "given twice"),
])
def test_bad_arguments_are_one_line_and_exit_2(capsys, two_runs, args, message):
    try:
        code = main([str(two_runs[0]) if a == "RUN" else a for a in args])
    except SystemExit as stop:  # argparse's own errors, printed in one line by the report's parser
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


@pytest.mark.slow
def test_the_command_line_prints_no_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "fedgc.reports.run_reports", str(tmp_path / "missing")],
                            cwd=Path(__file__).resolve().parents[1], check=False, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"error: {tmp_path / 'missing'}: no such run folder\n"


def test_labels_are_folder_names_made_unique():
    assert unique_labels([Path("/x/a/run"), Path("/x/b/run"), Path("/x/c/other")]) == ["a/run", "b/run", "other"]


def test_read_runs_keeps_the_rows(two_runs):
    dense, topk = read_runs(two_runs)
    assert [r.round for r in dense.rows] == [1, 2] and dense.summary.name == "dense"
    assert topk.summary.bytes_up == sum(r.bytes_up for r in topk.rows)
