"""The round timeline: keep_first, deadlines, cuts by availability, the server's fair-shared bandwidth."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from fedgc.network.availability import ExponentialOnOff, IntervalAvailability
from fedgc.network.compute import Device
from fedgc.network.fairshare import fair_share
from fedgc.network.links import ConstantLink
from fedgc.network.timeline import ClientJob, ClientNetwork, NetworkModel

MB = 1_000_000


def model(speeds_mbps, samples_per_s=100.0, rtt_ms=0.0, availability=None, **server) -> NetworkModel:
    clients = {}
    for i, mbps in enumerate(speeds_mbps):
        client = ClientNetwork(ConstantLink(mbps, mbps, rtt_ms), Device(samples_per_s))
        if availability is not None:
            client.availability = availability[i]
        clients[i] = client
    return NetworkModel(simpy.Environment(), clients, **server)


def test_round_times_follow_download_compute_upload():
    net = model([8.0], samples_per_s=50.0, rtt_ms=40.0)
    tl = net.run_round([ClientJob(0, down_bytes=MB, compute_samples=100, up_bytes=MB // 2)])
    t = tl.timings[0]
    assert t.status == "completed"
    assert t.downloaded == pytest.approx(1.0 + 0.02, abs=1e-9)
    assert t.computed == pytest.approx(t.downloaded + 2.0, abs=1e-9)
    assert t.uploaded == pytest.approx(t.computed + 0.5 + 0.02, abs=1e-9)
    assert tl.end == t.uploaded == net.env.now


def test_keep_first_keeps_the_first_k_and_closes_the_round():
    net = model([1.0, 2.0, 4.0, 8.0, 16.0])
    jobs = [ClientJob(i, MB, 0, MB) for i in range(5)]
    tl = net.run_round(jobs, keep_first=3)
    status = [t.status for t in tl.timings]
    # The two slow clients were still running when the first 3 were in: over-selection discarded them.
    assert status == ["discarded", "discarded", "completed", "completed", "completed"]
    assert tl.count("completed") == 3 and tl.count("discarded") == 2 and tl.count("late") == tl.count("cut") == 0
    assert tl.end == pytest.approx(4.0) == net.env.now  # the 4 Mbit/s client: 2 s + 2 s
    assert all(t.uploaded is None for t in tl.timings if t.status == "discarded")
    assert tl.timings[1].downloaded == pytest.approx(4.0)  # reached before the round closed
    assert tl.timings[0].downloaded is None  # 8 s: after the round closed


def test_deadline_makes_slow_clients_late_and_ends_the_round_there():
    net = model([1.0, 8.0])
    tl = net.run_round([ClientJob(i, MB, 0, MB) for i in range(2)], deadline_s=5.0)
    assert [t.status for t in tl.timings] == ["late", "completed"]
    assert tl.end == pytest.approx(5.0) == net.env.now


def test_without_deadline_or_keep_first_waits_for_everyone_and_clock_carries_over():
    net = model([1.0, 8.0])
    first = net.run_round([ClientJob(i, MB, 0, MB) for i in range(2)])
    assert first.count("completed") == 2 and first.end == pytest.approx(16.0)
    second = net.run_round([ClientJob(1, MB, 0, MB)])
    assert second.start == pytest.approx(16.0) and second.end == pytest.approx(18.0)


def test_transfer_cut_by_an_off_period_fails_the_client():
    # client 0 goes offline at 3 s, during its upload (download 1 s, compute 1 s, upload 2 s)
    avail = [IntervalAvailability([(0.0, 3.0), (10.0, 20.0)]), IntervalAvailability([(0.0, 100.0)])]
    net = model([8.0, 8.0], samples_per_s=100.0, availability=avail)
    tl = net.run_round([ClientJob(i, MB, 100, 2 * MB) for i in range(2)])
    cut, ok = tl.timings
    assert cut.status == "cut" and cut.uploaded is None
    assert cut.downloaded == pytest.approx(1.0) and cut.computed == pytest.approx(2.0)
    assert ok.status == "completed" and tl.end == pytest.approx(4.0)


def test_offline_during_download_and_offline_at_start_are_cut():
    avail = [IntervalAvailability([(0.0, 0.5)]), IntervalAvailability([(5.0, 9.0)]),
             IntervalAvailability([(0.0, 50.0)])]
    net = model([8.0, 8.0, 8.0], availability=avail)
    assert net.online_nodes([0, 1, 2, 99]) == [0, 2]
    tl = net.run_round([ClientJob(i, MB, 0, MB) for i in range(3)])
    assert [t.status for t in tl.timings] == ["cut", "cut", "completed"]
    assert tl.timings[0].downloaded is None and tl.timings[1].downloaded is None


def test_a_cut_after_the_round_closes_is_not_cut():
    avail = [IntervalAvailability([(0.0, 10.0)]), IntervalAvailability([(0.0, 100.0)])]
    net = model([0.5, 8.0], availability=avail)
    tl = net.run_round([ClientJob(i, MB, 0, MB) for i in range(2)], keep_first=1)
    assert [t.status for t in tl.timings] == ["discarded", "completed"] and tl.end == pytest.approx(2.0)


def test_keep_first_not_reached_by_the_deadline_makes_the_rest_late_not_discarded():
    net = model([1.0, 2.0, 16.0])
    tl = net.run_round([ClientJob(i, MB, 0, MB) for i in range(3)], keep_first=2, deadline_s=3.0)
    # Only the 16 Mbit/s client (1 s) is in by the deadline: the round closed at the deadline, not at K.
    assert [t.status for t in tl.timings] == ["late", "late", "completed"] and tl.end == pytest.approx(3.0)
    # With everyone in time and K = all of them, nobody is left to discard.
    tl = model([1.0, 2.0]).run_round([ClientJob(i, MB, 0, MB) for i in range(2)], keep_first=2)
    assert [t.status for t in tl.timings] == ["completed", "completed"]


def test_round_ends_when_the_remaining_clients_dropped_out():
    avail = [IntervalAvailability([(0.0, 1.5)]), IntervalAvailability([(0.0, 100.0)])]
    net = model([8.0, 8.0], availability=avail)
    tl = net.run_round([ClientJob(i, MB, 0, MB) for i in range(2)], deadline_s=50.0)
    assert [t.status for t in tl.timings] == ["cut", "completed"] and tl.end == pytest.approx(2.0)


def test_two_equal_concurrent_uploads_through_a_server_bottleneck_take_twice_as_long():
    alone = model([100.0], server_down_bps=10e6).run_round([ClientJob(0, 0, 0, 1_250_000)])
    assert alone.timings[0].uploaded == pytest.approx(1.0, abs=1e-9)
    both = model([100.0, 100.0], server_down_bps=10e6).run_round([ClientJob(i, 0, 0, 1_250_000) for i in range(2)])
    assert [t.uploaded for t in both.timings] == pytest.approx([2.0, 2.0], abs=1e-9)
    # downloads share the server's sending side the same way
    down = model([100.0, 100.0], server_up_bps=10e6).run_round([ClientJob(i, 1_250_000, 0, 0) for i in range(2)])
    assert [t.downloaded for t in down.timings] == pytest.approx([2.0, 2.0], abs=1e-9)


def test_fair_share_gives_a_slow_link_its_own_rate_and_the_rest_to_others():
    # 10 Mbit/s server; client links 2 and 100 Mbit/s; 4 Mbit each
    ends = fair_share([0.0, 0.0], [4e6, 4e6], [2e6, 100e6], [math.inf] * 2, 10e6)
    assert ends[1] == pytest.approx(0.5)  # 8 Mbit/s while both are active
    assert ends[0] == pytest.approx(2.0)  # 2 Mbit/s throughout


def test_fair_share_staggered_arrivals_and_aborts():
    # A alone at 10 for 0.5 s (5 Mbit), then A and B at 5 each; A has 5 Mbit left -> done at 1.5;
    # B then alone: 10 - 5 = 5 Mbit at 10 -> 2.0
    ends = fair_share([0.0, 0.5], [10e6, 10e6], [math.inf, math.inf], [math.inf, math.inf], 10e6)
    assert ends == pytest.approx([1.5, 2.0])
    # A aborts at 1.0: B then has the server alone
    ends = fair_share([0.0, 0.5], [10e6, 10e6], [math.inf, math.inf], [1.0, math.inf], 10e6)
    assert ends[0] == math.inf and ends[1] == pytest.approx(1.0 + 7.5 / 10)  # 2.5 Mbit by 1.0 s, 7.5 Mbit alone


def test_fair_share_many_flows_conserve_capacity():
    rng = np.random.default_rng(0)
    n = 500
    work = rng.uniform(1e6, 5e6, n).tolist()
    cap = rng.uniform(1e6, 20e6, n).tolist()
    ends = fair_share([0.0] * n, work, cap, [math.inf] * n, 100e6)
    assert max(ends) >= sum(work) / 100e6 - 1e-9  # never faster than the server
    assert all(e >= w / c - 1e-9 for e, w, c in zip(ends, work, cap))  # never faster than the link


def test_exponential_availability_is_seeded_and_stationary():
    a = ExponentialOnOff(30.0, 10.0, np.random.default_rng(5))
    b = ExponentialOnOff(30.0, 10.0, np.random.default_rng(5))
    grid = np.arange(0, 200_000, 7.0)
    on_a = [a.is_online(t) for t in grid]
    assert on_a == [b.is_online(t) for t in grid]
    assert np.mean(on_a) == pytest.approx(0.75, abs=0.02)
    t = 1234.5
    assert (a.next_off(t) > t) == a.is_online(t)


@pytest.mark.parametrize("claim, counted", [(120, 120), (12.0, 12), (float("nan"), 0), (float("inf"), 0), (-5, 0),
                                            ("many", 0), ([1, 2], 0), (True, 0), (None, 0)])
def test_a_reply_s_claimed_samples_never_crash_the_network_model(claim, counted):
    # The network reads a reply's ``samples`` for its compute time before the strategy validates it;
    # a malformed claim counts as no compute here, and the strategy rejects the reply as bad-metrics.
    from fedgc.flower.server.exchange import _claimed_samples

    assert _claimed_samples({} if claim is None else {"samples": claim}, None) == counted


@pytest.mark.parametrize("claim", [2**62, 1e300, 10**30])
def test_the_clock_is_charged_no_more_samples_than_the_server_asked_for(claim):
    """A claim consistent enough to pass the metric checks (``steps = samples = 2^62``) is charged
    what the train message asked for, never the claim (the strategy then rejects it as bad-metrics)."""
    from fedgc.flower.server.exchange import _claimed_samples

    assert _claimed_samples({"samples": claim}, 48) == 48
    assert _claimed_samples({"samples": 30}, 48) == 30


def test_a_compute_phase_beyond_max_phase_s_is_one_line_naming_the_client():
    from fedgc.network.timeline import PhaseTooLong

    clients = {n: ClientNetwork(ConstantLink(8.0, 8.0, 0.0), Device(1.0)) for n in (1, 2)}
    network = NetworkModel(simpy.Environment(), clients, max_phase_s=100.0)
    assert network.run_round([ClientJob(1, 100, 50, 100)]).end < 100
    with pytest.raises(PhaseTooLong, match=r"^client 2: its compute phase \(5000 samples\) would last 5e\+03 s"):
        network.run_round([ClientJob(2, 100, 5000, 100)])


def test_a_compute_claim_of_2_62_samples_on_a_gilbert_elliott_link_is_one_line_and_allocates_nothing():
    """Issue 28's case: a reply claiming ``steps = samples = 2^62`` on a Gilbert-Elliott link made the
    network model draw the channel's sample path up to ~10^19 s simulated (MemoryError). The exchange
    now charges at most what the train message asked for (above); charged directly, the phase is
    refused before the upload is placed on the channel, and nothing is drawn for it."""
    import resource
    import time

    from fedgc.network.links.gilbert_elliott import GilbertElliottLink
    from fedgc.network.timeline import PhaseTooLong

    link = GilbertElliottLink(8.0, 8.0, rng=np.random.default_rng(0))
    network = NetworkModel(simpy.Environment(), {1: ClientNetwork(link, Device(100.0))})
    before, started = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.monotonic()
    with pytest.raises(PhaseTooLong, match=r"^client 1: its compute phase \(4611686018427387904 samples\)"):
        network.run_round([ClientJob(1, 1000, 2**62, 1000)])
    assert time.monotonic() - started < 1.0
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 20
    assert len(link._ends) < 100  # the path was drawn only as far as the download needed
