"""The progress line (fedgc/reports/progress.py): fits the terminal's width with the mobile fields kept, a
sensible line on a terminal that reports 0 columns, and no time left until two rounds are timed."""

from __future__ import annotations

import io
import re

from fedgc.reports.progress import Progress, RunSoFar, progress_line
from fedgc.runs.metrics import RoundRecord

BIG = RunSoFar(bytes_up=123_456_789, bytes_down=9_876_543_210, last_accuracy=0.9123, failed=30)


def busy_round(number: int = 123) -> RoundRecord:
    return RoundRecord(round=number, sim_end_s=12_345.0, completed=10, cut=3, late=12, discarded=4, failed=1)


def test_at_80_columns_the_line_keeps_the_cut_late_and_discarded_counts():
    line = progress_line(busy_round(), BIG, 500, 80, eta_s=3725)
    assert len(line) < 80
    assert line == "123/500 91.2% up 123MB dn 9.88GB ok10 cut3 late12 disc4 fail1/30 eta 1:02:05"


def test_a_wide_terminal_gets_the_labelled_line_and_a_narrow_one_keeps_the_mobile_fields():
    quiet = RoundRecord(round=12, sim_end_s=1052.0, completed=5, late=1, discarded=2)
    so_far = RunSoFar(bytes_up=420_000, bytes_down=3_100_000, last_accuracy=0.812, failed=3)
    assert progress_line(quiet, so_far, 40, 120, eta_s=21) == \
        "round 12/40 sim 1,052s acc 81.2% up 0.420MB down 3.10MB | ok 5 cut 0 late 1 disc 2 fail 0/3 eta 21s"
    for width in range(40, 121):
        line = progress_line(busy_round(), BIG, 500, width, eta_s=3725)
        assert len(line) < width and re.search(r"ok ?10 cut ?3 late ?12 disc ?4 fail ?1/30", line), (width, line)


def test_a_terminal_reporting_0_columns_is_taken_as_80_wide():
    assert progress_line(busy_round(), BIG, 500, 0, eta_s=3725) == progress_line(busy_round(), BIG, 500, 80, eta_s=3725)
    stream = io.StringIO()
    progress = Progress(rounds=500, stream=stream, width=0)
    progress.update(busy_round(1))
    assert 0 < len(stream.getvalue().split("\r\x1b[K")[-1]) < 80


def test_no_time_left_is_shown_until_two_rounds_are_timed_and_the_first_round_s_start_up_is_left_out():
    times = iter([100.0, 101.0, 103.0])  # round 1 ends at 100 s (start-up included), then 1 s and 2 s rounds
    stream = io.StringIO()
    progress = Progress(rounds=10, stream=stream, width=120, clock=lambda: next(times))
    progress.update(RoundRecord(round=1))
    assert "eta" not in stream.getvalue()
    progress.update(RoundRecord(round=2))
    assert stream.getvalue().endswith("eta 8s")  # 1 s a round, 8 rounds left
    progress.update(RoundRecord(round=3))
    assert stream.getvalue().endswith("eta 10s")  # (103 - 100) / 2 = 1.5 s a round, 7 left: 10.5 → 10
    progress.note("warning: something")  # above the line, which is drawn again
    assert stream.getvalue().endswith("warning: something\n\r\x1b[K" + progress.line) and "eta 10s" in progress.line
    progress.close()
    assert stream.getvalue().endswith("\n")


def test_a_resumed_run_counts_from_its_history_and_times_only_its_own_rounds():
    times = iter([50.0, 52.0])
    history = [RoundRecord(round=r, bytes_up=100) for r in (1, 2, 3)]
    progress = Progress(rounds=5, stream=io.StringIO(), width=120, history=history, clock=lambda: next(times))
    progress.update(RoundRecord(round=4, bytes_up=100))
    assert progress.line.startswith("round 4/5") and "eta" not in progress.line
    progress.update(RoundRecord(round=5, bytes_up=100))
    assert progress.line.endswith("eta 0s") and progress.so_far.bytes_up == 500
