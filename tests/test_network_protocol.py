"""The protocol term of the network model (``network.protocol``): ``flower`` adds the documented costs
(pick-up delay, request round trips, reply poll and object-pull backoff) to ``ideal``'s times, and ``ideal`` is the
default and adds nothing."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from pydantic import ValidationError

from fedgc.network import build_network
from fedgc.network.config import NetworkConfig
from fedgc.network.protocol import Protocol
from fedgc.network.timeline import ClientJob

JOBS = [ClientJob(1, 2_000_000, 300, 1_000_000), ClientJob(2, 1_000_000, 900, 3_000_000)]


def run(deadline_s=None, **network):
    config = NetworkConfig(**{"up_mbps": 4.0, "down_mbps": 8.0, "rtt_ms": 40.0, "device_samples_per_s": 100.0,
                              **network})
    net = build_network(simpy.Environment(initial_time=5.0), config, [1, 2], np.random.default_rng(0))
    return net.run_round(JOBS, deadline_s=deadline_s)


def test_ideal_is_the_default_and_adds_nothing():
    assert NetworkConfig().protocol.name == "ideal"
    tl = run()
    for t, job in zip(tl.timings, JOBS):
        down = 5.0 + job.down_bytes * 8 / 8e6 + 0.02
        comp = down + job.compute_samples / 100.0
        assert (t.downloaded, t.computed, t.uploaded) == pytest.approx((down, comp, comp + job.up_bytes * 8 / 4e6 + 0.02))
    assert tl.end == max(t.uploaded for t in tl.timings)


def test_held_follows_the_reply_poll_and_the_object_pull_backoff():
    fedgc_poll = Protocol(reply_poll_s=0.05, pull_backoff_s=1.0, pull_backoff_cap_s=10.0)
    # listed when the upload starts (10.0); object tries at +0, 1, 3, 7, 15: the last byte (20.5) is seen at +15
    assert fedgc_poll.held(0.0, 10.0, 20.5) == pytest.approx(25.0)
    assert fedgc_poll.held(0.0, 10.0, 17.0) == pytest.approx(17.0)  # exactly on the +7 try
    capped = Protocol(reply_poll_s=0.05, pull_backoff_s=1.0, pull_backoff_cap_s=4.0)
    assert capped.held(0.0, 10.0, 20.5) == pytest.approx(21.0)  # tries at +0, 1, 3, 7, 11
    three_s = Protocol(reply_poll_s=3.0, pull_backoff_s=1.0, pull_backoff_cap_s=10.0)
    assert three_s.held(0.0, 10.0, 20.5) == pytest.approx(27.0)  # listed on the poll at 12, then +15
    assert three_s.held(0.0, 10.0, 11.0) == pytest.approx(12.0)  # complete before it was listed
    assert Protocol(reply_poll_s=3.0).held(0.0, 10.0, 20.5) == pytest.approx(20.5)  # no backoff: pulled as it arrives


@pytest.mark.parametrize(("step", "backoff"), [(0.05, 0.0), (3.0, 0.0), (0.05, 1.0), (3.0, 1.0)])
def test_flower_follows_the_documented_formula(step, backoff):
    ideal, flower = run(), run(protocol="flower", reply_poll_s=step, pull_backoff_s=backoff)
    rtt = 0.04
    proto = Protocol(reply_poll_s=step, pull_backoff_s=backoff, pull_backoff_cap_s=10.0)
    for a, b in zip(ideal.timings, flower.timings):
        assert b.downloaded == pytest.approx(a.downloaded + 1.5 + 6 * rtt)  # pull_interval_s / 2 + 6 round trips
        assert b.computed - b.downloaded == pytest.approx(a.computed - a.downloaded)
        arrival = a.uploaded + 1.5 + 6 * rtt + 1 * rtt
        assert b.uploaded == pytest.approx(proto.held(5.0, b.computed, arrival))
        assert b.uploaded >= arrival - 1e-9
    assert flower.end == pytest.approx(max(t.uploaded for t in flower.timings))


def test_by_default_a_reply_is_held_when_its_last_byte_arrives():
    """fedgc's server collects a reply as its last object arrives (no Flower pull backoff): with the
    defaults, the upload's end is the ideal one shifted by the pick-up delay and the round trips."""
    assert NetworkConfig(protocol="flower").protocol.pull_backoff_s == 0.0
    ideal, flower = run(), run(protocol="flower")
    for a, b in zip(ideal.timings, flower.timings):
        assert b.uploaded == pytest.approx(a.uploaded + 1.5 + 7 * 0.04)


def test_a_resolved_file_from_before_keeps_loading():
    """A flat-form file written when the backoff's default was Flower's 1 s lists it under ideal."""
    assert NetworkConfig(protocol="ideal", pull_backoff_s=1.0, requests_down=3, requests_up=2).protocol.name == "ideal"
    with pytest.raises(ValidationError, match="pull_backoff_s: only applies when protocol is flower"):
        NetworkConfig(protocol="ideal", pull_backoff_s=2.0)


def test_flower_parameters_and_a_deadline():
    tl = run(protocol="flower", pull_interval_s=0.0, requests_down=0, requests_up=0, reply_poll_s=0.0,
             pull_backoff_s=0.0)
    assert [t.uploaded for t in tl.timings] == pytest.approx([t.uploaded for t in run().timings])
    uncapped = run(protocol="flower")
    assert uncapped.end > 5.0 + 17.5
    capped = run(protocol="flower", deadline_s=17.5)
    assert capped.end == pytest.approx(5.0 + 17.5) and capped.count("completed") < 2


def test_flower_with_a_shared_server_link():
    ideal = run(server_up_mbps=8.0)
    flower = run(protocol="flower", server_up_mbps=8.0, requests_down=0, requests_up=0, reply_poll_s=0.0,
                 pull_backoff_s=0.0)
    for a, b in zip(ideal.timings, flower.timings):
        assert b.downloaded == pytest.approx(a.downloaded + 1.5)
        assert b.uploaded == pytest.approx(a.uploaded + 1.5)


@pytest.mark.parametrize("key", ["pull_interval_s", "requests_down", "requests_up", "reply_poll_s", "pull_backoff_s",
                                 "pull_backoff_cap_s"])
def test_protocol_keys_need_the_flower_protocol(key):
    with pytest.raises(ValidationError, match=f"{key}: only applies when protocol is flower"):
        NetworkConfig(**{key: 7})
    with pytest.raises(ValidationError, match=f"{key}\n  Extra inputs are not permitted"):
        NetworkConfig(protocol={"name": "ideal", key: 7})
    assert NetworkConfig(protocol={"name": "flower", key: 7}) == NetworkConfig(protocol="flower", **{key: 7})


def test_unknown_protocol_and_bad_values_are_refused():
    with pytest.raises(ValidationError, match="protocol"):
        NetworkConfig(protocol="grpc")
    with pytest.raises(ValidationError, match="reply_poll_s"):
        NetworkConfig(protocol="flower", reply_poll_s=-1)
