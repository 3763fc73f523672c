"""The ``network`` config section, build_network, profiles, devices and availability files."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy
from pydantic import ValidationError

from fedgc.network.build import build_network
from fedgc.network.compute import DEVICE_TIERS, read_capacity_file
from fedgc.network.config import NetworkConfig
from fedgc.network.links import ConstantLink, GilbertElliottLink, TraceLink
from fedgc.network.profiles import PROFILES
from fedgc.network.timeline import ClientJob
from fedgc.scenario.model import ScenarioError, validate


def build(n=4, seed=0, **keys):
    env = simpy.Environment()
    return env, build_network(env, NetworkConfig(**keys), list(range(100, 100 + n)), np.random.default_rng(seed))


def test_profiles_match_the_published_figures():
    assert (PROFILES["3g"].down_mbps, PROFILES["3g"].up_mbps) == (1.5, 0.84)
    assert (PROFILES["lte"].down_mbps, PROFILES["lte"].up_mbps) == (13.0, 6.0) and 44 <= PROFILES["lte"].rtt_ms <= 66
    assert (PROFILES["5g"].down_mbps, PROFILES["5g"].up_mbps) == (166.0, 21.0)
    assert {"3g", "lte", "5g", "wifi", "ideal"} <= set(PROFILES)


def test_default_build_is_the_lte_profile_for_every_node():
    _, net = build()
    link = net.clients[100].link
    assert isinstance(link, ConstantLink) and link.bps == {"up": 6e6, "down": 13e6}
    assert net.online_nodes([100, 101, 7]) == [100, 101]


@pytest.mark.parametrize("keys, line", [
    ({"profile": "6g"}, "network.profile: unknown network profile '6g'"),
    ({"link": "trace"}, "network.link.down: required when link is trace"),
    ({"link": {"name": "trace", "down": []}}, "network.link.down: List should have at least 1 item"),
    ({"trace_down": ["x"]},
     "network.trace_down: only applies when link is trace (write network.link: {name: trace, down: ...})"),
    ({"link": {"name": "constant", "down": ["x"]}},
     "network.link.down: not a key of link constant (its keys: name, bandwidth_file)"),
    ({"link": "carrier_pigeon"},
     "network.link: unknown name 'carrier_pigeon' (known: constant, gilbert_elliott, trace)"),
    ({"link": {"down": ["x"]}}, "network.link: needs a name"),
    ({"bandwidth_spread": -1}, "network.bandwidth_spread: Input should be greater than or equal to 0"),
    ({"link": "gilbert_elliott", "ge_bad_loss": 1.5}, "network.link.bad_loss: Input should be less than or equal to 1"),
    ({"device_tier": "potato"}, "network.device.tier: Input should be 'low', 'mid', 'high' or 'mixed'"),
    ({"device_tier": "low", "device_file": "x.csv"}, "network.device_tier: set either device_tier or device_file"),
    ({"availability": "trace"}, "network.availability.file: required when availability is trace"),
    ({"availability_period_s": 10}, "network.availability_period_s: only applies when availability is trace"),
    ({"availability": {"name": "exponential", "period_s": 10}},
     "network.availability.period_s: not a key of availability exponential"),
    ({"pull_interval_s": 1}, "network.pull_interval_s: only applies when protocol is flower"),
    ({"link": {"name": "trace", "down": ["a"], "up": ["a", "b"]}}, "network.link.up: must list as many files"),
    ({"server_up_mbps": 0}, "network.server_up_mbps: Input should be greater than 0"),
    ({"colour": "red"}, "network.colour: unknown key"),
])
def test_config_errors_name_the_key_and_the_rule_in_one_line(keys, line):
    """Flat keys and tagged sections alike: the message names the key as written and what is wrong."""
    with pytest.raises(ScenarioError) as err:
        validate({"name": "net", "rounds": 1, "network": keys})
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_the_flat_form_and_the_tagged_form_are_one_network(shared_dir):
    """Scenarios written before the tagged sections (and every resolved scenario.yaml, which lists each
    key with its default) read as the tagged form; a resolved file validates back to itself."""
    folder = str(shared_dir / "traces" / "mahimahi")
    flat = {"link": "trace", "trace_format": "mahimahi", "trace_dir": folder, "trace_down": ["Verizon-LTE-short.down"],
            "device_tier": "mixed", "availability": "exponential", "mean_on_s": 1200, "protocol": "flower",
            "reply_poll_s": 3, "ge_bad_factor": 0.1, "device_samples_per_s": 500, "availability_file": None}
    tagged = {"link": {"name": "trace", "format": "mahimahi", "down": ["Verizon-LTE-short.down"]},
              "trace_dir": folder, "device": {"name": "tier", "tier": "mixed"},
              "availability": {"name": "exponential", "mean_on_s": 1200},
              "protocol": {"name": "flower", "reply_poll_s": 3}}
    assert (validate({"name": "net", "rounds": 1, "network": flat}).network
            == validate({"name": "net", "rounds": 1, "network": tagged}).network)
    resolved = validate({"name": "net", "rounds": 1, "network": tagged}).network.model_dump(mode="json")
    assert NetworkConfig.model_validate(resolved, strict=True).model_dump(mode="json") == resolved
    assert resolved["link"]["name"] == "trace" and "trace_down" not in resolved


def test_missing_trace_file_is_a_one_line_error_naming_it(tmp_path):
    with pytest.raises(ValidationError) as err:
        NetworkConfig(link="trace", trace_down=["nope.down"], trace_format="mahimahi", trace_dir=str(tmp_path))
    message = err.value.errors()[0]["msg"]
    assert str(tmp_path / "nope.down") in message and "no such file" in message and "\n" not in message
    bad = tmp_path / "bad.down"
    bad.write_text("not a trace\n")
    config = NetworkConfig(link="trace", trace_down=[str(bad)], trace_format="mahimahi")
    with pytest.raises(ValueError, match=r"bad\.down: not a list of numbers"):
        build_network(simpy.Environment(), config, [0], np.random.default_rng(0))


def test_trace_links_round_robin_over_files(shared_dir):
    folder = shared_dir / "traces" / "mahimahi"
    _, net = build(n=3, link="trace", trace_format="mahimahi", trace_dir=str(folder),
                   trace_down=["ATT-LTE-driving-2016.down", "TMobile-LTE-short.down"],
                   trace_up=["ATT-LTE-driving-2016.up", "TMobile-LTE-short.up"])
    links = [net.clients[100 + i].link for i in range(3)]
    assert all(isinstance(link, TraceLink) for link in links)
    assert links[0].mean_bps("down") / 1e6 == pytest.approx(4.56, rel=0.01)
    assert links[1].mean_bps("up") / 1e6 == pytest.approx(13.32, rel=0.01)
    assert links[2].curves["down"] is links[0].curves["down"]  # one parsed copy per file
    assert links[0].offset_s != links[2].offset_s  # random phase per client


def test_pensieve_trace_without_uplink_scales_by_the_profile(shared_dir):
    path = shared_dir / "traces/pensieve/norway_hsdpa_cooked_3gp/norway_bus_1"
    _, net = build(n=1, link="trace", trace_down=[str(path)], profile="3g")
    link = net.clients[100].link
    assert link.mean_bps("up") == pytest.approx(link.mean_bps("down") * 0.84 / 1.5)


def test_gilbert_elliott_build_uses_config():
    _, net = build(link="gilbert_elliott", ge_mean_good_s=4, ge_mean_bad_s=1, ge_bad_factor=0.5, ge_bad_loss=0.0)
    link = net.clients[101].link
    assert isinstance(link, GilbertElliottLink) and link.bad_fraction == pytest.approx(0.2)
    assert link.mean_bps("down") == pytest.approx(13e6 * (0.8 + 0.2 * 0.5))


def test_lognormal_spread_keeps_the_profile_median_and_is_seeded():
    _, a = build(n=4000, bandwidth_spread=0.8)
    _, b = build(n=4000, bandwidth_spread=0.8)
    down = np.array([c.link.bps["down"] for c in a.clients.values()])
    assert np.median(down) == pytest.approx(13e6, rel=0.05)
    assert np.std(np.log(down)) == pytest.approx(0.8, rel=0.05)
    assert down.tolist() == [c.link.bps["down"] for c in b.clients.values()]


def test_devices_from_tiers_and_the_fedscale_capacity_file(shared_dir):
    _, net = build(n=300, device_tier="mixed")
    assert {c.device.samples_per_s for c in net.clients.values()} == set(DEVICE_TIERS.values())
    path = shared_dir / "traces/fedscale/client_device_capacity_ul_dl.csv"
    _, net = build(n=50, device_file=str(path), bandwidth_file=str(path))
    table = read_capacity_file(path)
    allowed = set((1000.0 / (3.0 * table["computation_ms_per_sample"])).tolist())
    assert all(c.device.samples_per_s in allowed for c in net.clients.values())
    ul = set((table["ul_kbps"] * 1000).tolist())
    assert all(c.link.bps["up"] == pytest.approx(min(ul, key=lambda v: abs(v - c.link.bps["up"])))
               for c in net.clients.values())
    assert len({c.device.samples_per_s for c in net.clients.values()}) > 5


def test_availability_file_is_honoured_to_the_second(tmp_path):
    path = tmp_path / "avail.csv"
    path.write_text("client,start_s,end_s\n0,0,10\n0,25,40\n1,5,30\n")
    env, net = build(n=3, availability="trace", availability_file=str(path))
    expected = {100: lambda t: t < 10 or 25 <= t < 40, 101: lambda t: 5 <= t < 30, 102: lambda t: t < 10 or 25 <= t < 40}
    for second in range(50):
        if second > env.now:
            env.run(until=second)
        assert net.online_nodes([100, 101, 102]) == [n for n in (100, 101, 102) if expected[n](second)], second


def test_availability_file_repeats_with_a_period(tmp_path):
    path = tmp_path / "avail.csv"
    path.write_text("client,start_s,end_s\n0,0,5\n0,8,10\n")
    env, net = build(n=1, availability="trace", availability_file=str(path), availability_period_s=10)
    online = []
    for second in range(1, 30):
        env.run(until=second)
        online.append(bool(net.online_nodes([100])))
    assert online == [(s % 10) < 5 or (s % 10) >= 8 for s in range(1, 30)]
    assert net.clients[100].availability.next_off(9.0) == pytest.approx(15.0)  # runs on into the next period


def test_exponential_availability_round_is_reproducible():
    def run(seed):
        _, net = build(n=200, seed=seed, availability="exponential", mean_on_s=60, mean_off_s=20)
        online = net.online_nodes(list(range(100, 300)))
        tl = net.run_round([ClientJob(n, 2_000_000, 500, 2_000_000) for n in online])
        return online, [(t.status, t.uploaded) for t in tl.timings]

    first = run(1)
    assert first == run(1) and first != run(2)
    assert 0.6 < len(first[0]) / 200 < 0.9
    assert {status for status, _ in first[1]} == {"completed", "cut"}


def test_next_on_is_the_first_online_moment(tmp_path):
    path = tmp_path / "avail.csv"
    path.write_text("client,start_s,end_s\n0,0,10\n0,25,40\n")
    _, net = build(n=1, availability="trace", availability_file=str(path))
    after = net.clients[100].availability
    assert [after.next_on(t) for t in (3.0, 12.0, 25.0, 41.0)] == [3.0, 25.0, 25.0, math.inf]
    _, periodic = build(n=1, availability="trace", availability_file=str(path), availability_period_s=50)
    assert periodic.clients[100].availability.next_on(41.0) == 50.0  # the next period's first interval
    _, churn = build(n=1, availability="exponential", mean_on_s=5.0, mean_off_s=5.0)
    process = churn.clients[100].availability
    for t in np.linspace(0, 100, 41):
        first = process.next_on(float(t))
        assert process.is_online(first) and first >= t
        assert not any(process.is_online(float(u)) for u in np.linspace(t, first, 20)[:-1]) or first == t


def test_when_everybody_is_offline_the_round_waits_for_the_first_to_return(tmp_path):
    from fedgc.flower.server.exchange import SimulatedExchange

    path = tmp_path / "avail.csv"
    path.write_text("client,start_s,end_s\n0,0,10\n0,30,90\n1,0,10\n1,25,90\n")
    env = simpy.Environment()
    net = build_network(env, NetworkConfig(availability="trace", availability_file=str(path)), [1, 2],
                        np.random.default_rng(0))
    exchange = SimulatedExchange(net)
    env.run(until=12)
    assert exchange.online([1, 2]) == [2] and env.now == 25  # the server waited 13 simulated seconds
    env.run(until=95)
    assert exchange.online([1, 2]) == [] and env.now == 95  # nobody ever returns: no wait, no round
