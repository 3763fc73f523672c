"""The first result answers the question: a run beside its baselines, a human summary at the end of
every run, and an interrupted run that keeps its work and resumes to the uninterrupted metrics."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fedgc.cli.run import main
from fedgc.reports.compare import baseline_variants, human_summary
from fedgc.runs.metrics import read_summary
from fedgc.scenario.model import load_scenario, validate

from .conftest import REPO


def test_the_baselines_of_a_scenario_are_dense_and_both_directions_compressed():
    quickstart = load_scenario(REPO / "scenarios" / "quickstart.yaml")
    dense, as_written, both = baseline_variants(quickstart)
    assert (dense.label, as_written.label, both.label) == ("dense", "dgc up", "dgc up + topk down")
    assert dense.scenario.compression.name == "none" and not dense.scenario.downlink.enabled
    assert as_written.scenario == quickstart
    assert both.scenario.downlink.name == "topk" and both.scenario.downlink.density == 0.1
    assert both.scenario.compression == quickstart.compression
    # A scenario that already compresses its downloads is compared with dense downloads instead.
    tree = quickstart.model_dump(mode="json")
    tree["downlink"] = {"name": "qsgd"}
    _, up_only, down = baseline_variants(validate(tree))
    assert (up_only.label, down.label) == ("dgc up only", "dgc up + qsgd down") and not up_only.scenario.downlink.enabled


@pytest.mark.slow
def test_baseline_prints_the_table_and_a_reading_and_keeps_three_run_folders(tmp_path, tiny_scenario, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**tiny_scenario, "rounds": 3}))
    out = tmp_path / "cmp"
    assert main([str(path), "--baseline", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["method", "acc", "to", "50%", "rounds", "MB", "up", "MB", "down", "up", "×",
                                  "speed-up"]
    assert [line.split("  ")[0] for line in printed[2:5]] == ["dense", "topk up", "topk up + topk down"]
    assert all(len(line) <= 80 for line in printed[:5])
    assert "of the bytes of topk up" in printed[6] and printed[7].startswith(f"outputs in {out}")
    for folder in ("dense", "topk-up", "topk-up-down"):
        assert read_summary(out / folder / "summary.json").rounds == 3
    assert (out / "comparison.md").read_text().count("\n") > 6


def test_the_same_comparison_is_one_call_in_the_python_api(tmp_path, tiny_scenario, capsys):
    """fedgc.baseline runs what --baseline runs, into a comparison folder or in memory; a comparison
    folder is one --overwrite clears."""
    import fedgc

    scenario = {**tiny_scenario, "rounds": 1}
    out = tmp_path / "cmp"
    comparison = fedgc.baseline(scenario, out)
    assert [r.label for r in comparison.runs] == ["dense", "topk up", "topk up + topk down"]
    assert [r.out_dir for r in comparison.runs] == [out / "dense", out / "topk-up", out / "topk-up-down"]
    assert comparison.runs[1].scenario == fedgc.Scenario.from_dict(scenario)
    assert comparison.table().splitlines()[2].startswith("dense ") and "topk up" in comparison.reading()
    assert f"```\n{comparison.table()}\n```\n\n{comparison.reading()}\n" in (out / "comparison.md").read_text()
    with pytest.raises(ValueError, match="already holds files"):
        fedgc.baseline(scenario, out)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert main([str(path), "--baseline", "--out", str(out), "--overwrite", "--quiet"]) == 0
    assert capsys.readouterr().out.startswith(comparison.table())  # same seed, same table
    in_memory = fedgc.baseline(scenario)
    assert in_memory.out_dir is None and all(r.out_dir is None for r in in_memory.runs)
    assert in_memory.table() == comparison.table()


def _png_text(path: Path) -> dict[str, str]:
    from PIL import Image

    with Image.open(path) as image:
        return dict(image.text)


def test_baseline_overlays_its_variants_in_its_folder_and_titles_each_variant_s_plots(tmp_path, tiny_scenario):
    """Accuracy against simulated time and against bytes up + down, one labelled line per variant, in
    the comparison folder; each variant's own plots titled with its label, not only the scenario's name."""
    import fedgc

    out = tmp_path / "cmp"
    fedgc.baseline({**tiny_scenario, "rounds": 2}, out)
    labels = ["dense", "topk up", "topk up + topk down"]
    for name, axis in (("compare_accuracy_vs_time.png", "simulated time"),
                       ("compare_accuracy_vs_total_bytes.png", "bytes up + down")):
        text = _png_text(out / name)
        assert text["Title"] == f"tiny: accuracy vs {axis} (3 runs)"
        assert text["Description"].split("; ")[:3] == labels
    assert "`compare_accuracy_vs_total_bytes.png`" in (out / "comparison.md").read_text()
    for folder, label in zip(("dense", "topk-up", "topk-up-down"), labels):
        assert _png_text(out / folder / "plots" / "accuracy_vs_time.png")["Title"] == \
            f"tiny, {label}: accuracy vs simulated time"


def test_every_run_ends_with_a_human_summary_and_json_only_when_asked(tmp_path, tiny_scenario, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    assert main([str(path), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("tiny: 2 rounds, final accuracy 0.")
    assert lines[1].startswith("up ") and lines[1].endswith(f"outputs in {tmp_path / 'a'}")
    assert main([str(path), "--out", str(tmp_path / "b"), "--quiet", "--json"]) == 0
    assert '"stopped_reason": "completed"' in capsys.readouterr().out
    summary = read_summary(tmp_path / "a" / "summary.json")
    assert human_summary(summary, None).count("\n") == 1


def test_the_summary_gives_the_rounds_wall_time_and_the_whole_command_s_beside_it(tmp_path, tiny_scenario):
    """``summary.wall_time_s`` counts the run's loop only; the line also says how long the command took, from
    its process's start (the interpreter, the imports, the data, the plots) to the line: timed here from
    before the process started to when the line arrived."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    started = time.monotonic()
    with subprocess.Popen([sys.executable, "-m", "fedgc", "run", str(path), "--out", str(tmp_path / "r"), "--quiet"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"},
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        line = next(line for line in proc.stdout if "outputs in " in line)
        measured = time.monotonic() - started
        assert proc.wait(timeout=120) == 0
    rounds_s, command_s = (float(s) for s in re.search(
        r"; wall clock: ([0-9.]+) s the run \(data, model, rounds\), ([0-9.]+) s the whole command; outputs in ", line).groups())
    assert rounds_s == round(read_summary(tmp_path / "r" / "summary.json").wall_time_s, 1)
    assert rounds_s < command_s <= measured + 0.05  # the command holds the rounds, and is held by what we timed
    assert command_s >= measured - 0.75, (command_s, measured)  # from the process's start, not from main()


def test_the_first_signal_asks_to_stop_after_the_round_and_a_second_stops_at_once(capsys):
    from fedgc.core.stop import stop_requests

    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (not a background job)
    try:
        with stop_requests() as request:
            os.kill(os.getpid(), signal.SIGINT)
            assert request.asked and request.signal == signal.SIGINT  # the round in progress goes on
            assert "stopping after this round (Ctrl-C again to stop at once)" in capsys.readouterr().err
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are put back
    finally:
        signal.signal(signal.SIGINT, inherited)


def _short_quickstart(folder) -> Path:
    tree = yaml.safe_load((REPO / "scenarios" / "quickstart.yaml").read_text())
    tree.update(rounds=12, checkpoint_every=10)
    path = folder / "q.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


@pytest.fixture(scope="module")
def uninterrupted_quickstart(tmp_path_factory) -> bytes:
    """metrics.jsonl of the 12-round quickstart run without a stop, made once for both signals."""
    folder = tmp_path_factory.mktemp("quickstart")
    done = subprocess.run([sys.executable, "-m", "fedgc.cli.run", str(_short_quickstart(folder)), "--out",
                           str(folder / "reference"), "--quiet"], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return (folder / "reference" / "metrics.jsonl").read_bytes()


@pytest.mark.slow
@pytest.mark.xdist_group(name="interrupted_quickstart")  # one worker: the uninterrupted run is made once
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_quickstart_keeps_its_work_and_resumes_to_the_uninterrupted_metrics(
        tmp_path, uninterrupted_quickstart, sig):
    """Stopped around round 7 (checkpoint every 10): a checkpoint of the round it stopped after,
    summary.json saying interrupted, plots and model.pt; --resume ends with the uninterrupted rows."""
    path = _short_quickstart(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(out), "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509 — one call, no lock
    try:
        metrics = out / "metrics.jsonl"
        while proc.poll() is None and not (metrics.exists() and len(metrics.read_text().splitlines()) >= 7):
            time.sleep(0.02)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    summary = read_summary(out / "summary.json")
    assert summary.stopped_reason == "interrupted" and 7 <= summary.rounds < 12
    said, resume = stderr.strip().splitlines()[-1].split("; resume with: ")
    assert said == f"interrupted after round {summary.rounds}"
    # the command as it was started (python -m fedgc run), so it runs as printed, here pasted below
    assert resume.endswith(f" -m fedgc.cli.run --resume {out}")
    assert (out / "model.pt").is_file() and any((out / "plots").iterdir()) and (out / "checkpoint.pt").is_file()
    from .test_checkpoint import checkpoint_state

    assert checkpoint_state(out)["round"] == summary.rounds  # the resume starts after the round it stopped after
    assert stdout.startswith("quickstart: ")
    from fedgc.reports.run_reports import read_run

    assert read_run(out).summary.stopped_reason == "interrupted"  # fedgc report takes the folder as it is
    done = subprocess.run([*shlex.split(resume), "--quiet"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert (out / "metrics.jsonl").read_bytes() == uninterrupted_quickstart
    assert read_summary(out / "summary.json").stopped_reason == "completed"
