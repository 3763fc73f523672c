"""Link models: constant, replayed traces (mahimahi, pensieve, lumos), Gilbert–Elliott."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedgc.network.links import LINKS, ConstantLink, GilbertElliottLink, TraceLink
from fedgc.network.traces import read_lumos, read_mahimahi, read_pensieve, read_trace


def test_registry_names_every_link():
    assert LINKS == {"constant": ConstantLink, "gilbert_elliott": GilbertElliottLink, "trace": TraceLink}


@pytest.mark.parametrize("nbytes", [0, 1, 1500, 123_457, 10_000_000])
def test_constant_link_is_serialization_plus_half_rtt(nbytes):
    link = ConstantLink(up_mbps=6.0, down_mbps=13.0, rtt_ms=55.0)
    for start in (0.0, 17.3):
        assert abs(link.transfer_time(start, nbytes, "down") - (nbytes * 8 / 13e6 + 0.0275)) < 1e-9
        assert abs(link.transfer_time(start, nbytes, "up") - (nbytes * 8 / 6e6 + 0.0275)) < 1e-9


def test_constant_link_jitter_is_bounded_and_seeded():
    draws = [ConstantLink(1, 1, 0, 10, np.random.default_rng(3)).transfer_time(0, 0, "up") for _ in range(2)]
    assert draws[0] == draws[1]
    link = ConstantLink(1, 1, 20, 10, np.random.default_rng(3))
    times = [link.transfer_time(0, 0, "up") for _ in range(1000)]
    assert 0.010 <= min(times) and max(times) <= 0.020 and np.std(times) > 0


def _mahimahi_mean_bps(path: Path) -> tuple[float, float]:
    stamps = [int(line) for line in path.read_text().split()]
    duration = stamps[-1] / 1000.0
    return len(stamps) * 1500 * 8 / duration, duration


@pytest.mark.parametrize("name", ["ATT-LTE-driving-2016.down", "ATT-LTE-driving-2016.up", "TMobile-LTE-short.up",
                                  "Verizon-EVDO-driving.down", "Verizon-LTE-short.down"])
def test_mahimahi_replay_delivers_the_file_mean_over_its_length(shared_dir, name):
    path = shared_dir / "traces" / "mahimahi" / name
    mean_bps, duration = _mahimahi_mean_bps(path)
    link = TraceLink(read_mahimahi(path))
    for start in (0.0, 0.37 * duration):
        bits = mean_bps * duration
        elapsed = link.serialize_time(start, int(bits / 8), "down")
        assert elapsed == pytest.approx(duration, rel=0.01)


def test_mahimahi_means_match_the_published_figures(shared_dir):
    folder = shared_dir / "traces" / "mahimahi"
    published = {"ATT-LTE-driving-2016": (4.6, 1.9), "TMobile-LTE-short": (16.7, 13.3),
                 "Verizon-EVDO-driving": (0.52, 0.84)}
    for name, (down, up) in published.items():
        assert read_mahimahi(folder / f"{name}.down").mean_bps / 1e6 == pytest.approx(down, rel=0.02)
        assert read_mahimahi(folder / f"{name}.up").mean_bps / 1e6 == pytest.approx(up, rel=0.02)


def _pensieve_mean_bps(path: Path) -> tuple[float, float]:
    data = np.loadtxt(path)
    t, r = data[:, 0], data[:, 1]
    return float(np.sum(r[1:] * np.diff(t)) / (t[-1] - t[0]) * 1e6), float(t[-1] - t[0])


@pytest.mark.parametrize("rel", ["cooked_traces/bus.ljansbakken-oslo-report.2010-09-28_1407CEST.log",
                                 "cooked_traces/car.snaroya-smestad-report.2011-02-14_2032CET.log",
                                 "norway_hsdpa_cooked_3gp/norway_bus_1"])
def test_pensieve_replay_delivers_the_file_mean_over_its_length(shared_dir, rel):
    path = shared_dir / "traces" / "pensieve" / rel
    mean_bps, duration = _pensieve_mean_bps(path)
    link = TraceLink(read_pensieve(path), offset_s=0.0)
    for start in (0.0, 123.4):
        elapsed = link.serialize_time(start, int(mean_bps * duration / 8), "down")
        assert elapsed == pytest.approx(duration, rel=0.01)


def test_pensieve_mean_matches_provenance_table(shared_dir):
    path = shared_dir / "traces/pensieve/cooked_traces/bus.ljansbakken-oslo-report.2010-09-28_1407CEST.log"
    assert read_pensieve(path).mean_bps / 1e6 == pytest.approx(2.764, abs=0.001)


def test_lumos_unit_is_megabytes_per_second(shared_dir):
    path = shared_dir / "traces/lumos5g/lumos_test_traces/lumos_trace_1.log"
    curve = read_lumos(path)
    assert curve.period == 230
    assert curve.mean_bps / 1e6 == pytest.approx(306.1, abs=0.1)
    assert read_trace(path, "lumos", "Mbit/s").mean_bps == pytest.approx(curve.mean_bps / 8)
    link = TraceLink(curve)
    assert link.serialize_time(0, int(curve.mean_bps * 230 / 8), "down") == pytest.approx(230, rel=0.01)


def test_trace_transfer_integrates_from_its_start(tmp_path):
    path = tmp_path / "steps.log"  # pensieve: 8 Mbit/s over (0,1], nothing over (1,2], 8 Mbit/s over (2,3]
    path.write_text("0 5\n1 8\n2 0\n3 8\n")
    link = TraceLink(read_pensieve(path), rtt_ms=100.0)
    assert link.serialize_time(0.0, 1_000_000, "down") == pytest.approx(1.0, abs=1e-9)
    assert link.serialize_time(0.5, 1_000_000, "down") == pytest.approx(2.0, abs=1e-9)
    assert link.transfer_time(0.5, 1_000_000, "down") == pytest.approx(2.05, abs=1e-9)
    # longer than the trace: loops (16 Mbit per 3 s period)
    assert link.serialize_time(0.0, 6_000_000, "down") == pytest.approx(3.0 * 3, abs=1e-9)
    # the uplink without its own trace is the downlink scaled
    assert TraceLink(read_pensieve(path), up_scale=0.5).serialize_time(0.0, 500_000, "up") == pytest.approx(1.0)


def test_mahimahi_reader_counts_packets_per_millisecond(tmp_path):
    path = tmp_path / "tiny.down"
    path.write_text("0\n0\n1\n3\n4\n")  # period 4 ms; the stamp 4 is slot 0 of the next loop
    curve = read_mahimahi(path)
    assert curve.period == pytest.approx(0.004)
    assert curve.per_period == 5 * 1500 * 8
    link = TraceLink(curve)
    assert link.serialize_time(0.0, 3 * 1500, "down") == pytest.approx(0.001, abs=1e-12)
    assert link.serialize_time(0.0, 4 * 1500, "down") == pytest.approx(0.002, abs=1e-12)


@pytest.mark.parametrize("content, rule", [("", "expected 2"), ("0 1\n1 x\n", "not a list of numbers"),
                                           ("0 0\n5 0\n", "delivers nothing"), ("3 1\n1 1\n", "never decrease")])
def test_bad_trace_files_raise_one_line_errors_naming_the_file(tmp_path, content, rule):
    path = tmp_path / "bad.log"
    path.write_text(content)
    with pytest.raises(ValueError, match=rule) as err:
        read_trace(path, "pensieve")
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_missing_trace_file_names_it(tmp_path):
    with pytest.raises(ValueError, match=r"missing\.down: no such file"):
        read_trace(tmp_path / "missing.down", "mahimahi")


def test_gilbert_elliott_long_run_bad_fraction_is_p_over_p_plus_r():
    # p = 1/mean_good (good->bad rate), r = 1/mean_bad (bad->good): bad fraction p/(p+r)
    for good, bad in [(10.0, 2.0), (3.0, 3.0), (1.0, 9.0)]:
        link = GilbertElliottLink(1, 1, rng=np.random.default_rng(7), mean_good_s=good, mean_bad_s=bad)
        p, r = 1 / good, 1 / bad
        horizon = 20_000.0 * (good + bad)
        assert link.time_in_bad(horizon) / horizon == pytest.approx(p / (p + r), abs=0.01)


def test_gilbert_elliott_goodput_integrates_state_changes():
    link = GilbertElliottLink(4.0, 20.0, rtt_ms=0, rng=np.random.default_rng(1), mean_good_s=5.0, mean_bad_s=1.0,
                              bad_factor=0.2, good_loss=0.01, bad_loss=0.1)
    curve = link._curves["down"]
    for start, nbytes in [(0.0, 1_000_000), (3.3, 25_000_000), (100.0, 7)]:
        elapsed = link.serialize_time(start, nbytes, "down")
        assert curve.bits_at(start + elapsed) - curve.bits_at(start) == pytest.approx(nbytes * 8, rel=1e-9, abs=1e-3)
    long_run = 10_000_000_000
    assert long_run * 8 / link.serialize_time(0.0, long_run, "down") == pytest.approx(link.mean_bps("down"), rel=0.03)
    assert link.mean_bps("down") == pytest.approx(20e6 * (5 / 6 * 0.99 + 1 / 6 * 0.2 * 0.9))


def test_gilbert_elliott_forgets_the_past_with_the_same_answers_and_bounded_memory():
    """A run's links are asked about the present and later only (``Timeline.run_round`` tells them the
    round's start): a Gilbert–Elliott link then holds the sojourns ahead, not the simulated time behind,
    and every transfer time is the same to the last bit as without forgetting."""
    kept, forgetting = (GilbertElliottLink(5, 20, rng=np.random.default_rng(3), mean_good_s=2.0, mean_bad_s=1.0)
                        for _ in range(2))
    held = []
    for round_start in np.arange(0.0, 1e6, 1e4):  # 100 rounds over 10^6 s, sojourns of 1.5 s on average
        forgetting.forget_before(round_start)
        for direction, nbytes in (("down", 4_000_000), ("up", 250_000)):
            for offset in (0.0, 0.7, 3.1):
                t = round_start + offset
                assert forgetting.serialize_time(t, nbytes, direction) == kept.serialize_time(t, nbytes, direction)
        held.append(len(forgetting._ends) + sum(len(c._times) for c in forgetting._curves.values()))
    assert max(held) < 100  # the link that keeps everything holds about 666,000 sojourns by now
    assert len(kept._ends) > 600_000
    with pytest.raises(ValueError, match="forgotten"):
        forgetting.serialize_time(5.0, 1000, "up")


def test_gilbert_elliott_is_seeded():
    a, b = (GilbertElliottLink(5, 5, rng=np.random.default_rng(11)) for _ in range(2))
    assert [a.serialize_time(t, 3_000_000, "up") for t in range(5)] == [
        b.serialize_time(t, 3_000_000, "up") for t in range(5)]
