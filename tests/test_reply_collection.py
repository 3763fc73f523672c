"""fedgc's server takes a reply as soon as its last byte has arrived, on a real deployment.

A SuperNode pushes its reply's header first and the objects after it, so the SuperLink lists the reply
while it is still uploading. Flower's own grid then retries the missing objects 1, 3, 7 … s (±20 %)
after listing it and holds the reply until the first retry after its last byte; fedgc's
``SuperLinkGrid`` tries again on every poll of its loop (0.05 s). Here one client uploads 1.2 MB over a
2.8 Mbit/s link (3.6 s at the link's rate, up to about 5 s with the SuperNode's pauses between objects:
between Flower's retries at about 3 and 7 s), and in every round the ServerApp must start pulling the
reply from the SuperLink (the reply's bytes on the hub's loopback) within two of its own polls of the
upload's last byte reaching the hub. Both instants are read off the same byte counters: the round's own
clock (``round_duration_s``) also holds the ServerApp's work before its push and after the pull, which a
loaded machine stretches (0.72 s seen in CI at nice -10, with the pull itself 0.07 s after the byte).
A poll is timed in the same round, not taken as the 0.05 s it is meant to be: while the client computes,
the ServerApp's polls are the only traffic on the hub's loopback, each a request and its answer, about
0.06 s apart on an idle machine (the poll's sleep and its own work), further apart on a loaded one
(the limit takes the slower tenth of them);
Flower's schedule holds a reply 0.4–8.4 s (docs/sim-to-real.md). Skipped, with the reason, where
namespaces or tc cannot be used (not root, no iproute2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedgc.shaped import unavailable_reason
from fedgc.shaped.phases import measure

REASON = unavailable_reason()

SCENARIO = {"name": "reply-collection", "seed": 0, "rounds": 2,
            "data": {"dataset": "digits", "num_clients": 1, "partition": "iid"},
            "model": {"name": "mlp", "options": {"hidden": [512, 512]}},  # 301k parameters: 1.2 MB each way
            "client": {"local_steps": 2, "batch_size": 32, "lr": 0.05},
            "compression": {"name": "none", "error_feedback": False},
            "strategy": {"fraction": 1.0}, "eval": {"every": 1000}}


def test_the_deployment_grid_is_collected_and_the_others_are_left_alone():
    from flwr.superlink.grid.http_grid import HttpGrid

    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.superlink_grid import SuperLinkGrid, collecting

    http = HttpGrid(token="a-token")  # not connected: it connects on its first request
    assert isinstance(collecting(http), SuperLinkGrid) and collecting(http).inner is http
    inline = InlineGrid.__new__(InlineGrid)  # fedgc's own transport (and Flower's InMemoryGrid) pull in-process
    assert collecting(inline) is inline


def server_polls(samples: list, start: float, end: float) -> np.ndarray:
    """When the ServerApp's exchanges with the SuperLink began between ``start`` and ``end``: each run of
    counter samples in which the hub's loopback grew (a request and its answer may fall in two)."""
    t = np.array([s[0] for s in samples])
    grew = np.diff(np.array([s[1]["lo"][1] for s in samples])) > 0  # grew[i]: from sample i to i + 1
    begins = grew & ~np.concatenate([[False], grew[:-1]])
    when = t[1:][begins]
    return when[(when >= start) & (when <= end)]


@pytest.mark.deployment
@pytest.mark.netns
@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_a_reply_is_collected_within_a_poll_of_its_last_byte(tmp_path, flower_app):
    measured = measure(SCENARIO, tmp_path, flower_app, rates=[(2.8, 20.0)], timeout_s=400)
    counters = json.loads((tmp_path / "counters.json").read_text())  # what measure() read the phases off
    for rnd in measured["rounds"]:
        (client,) = rnd["clients"]
        assert client["up_bytes"] > 1_100_000 and client["upload_s"] > 3.0, rnd  # the upload spans Flower's retries
        assert client["collected_s"] is not None, rnd  # the pull of the reply was seen on the loopback
        # The ServerApp's poll, in this round: the time between its exchanges while the client computes
        # (from 0.3 s after the download's last byte to 0.1 s before the upload's first), its slower ones
        # (the 90th percentile): a loaded machine that stretches some polls stretches the limit with them.
        push = counters["t0"] + rnd["start_s"]
        computing = (push + client["download_s"] + 0.3, push + client["download_s"] + client["compute_s"] - 0.1)
        polls = server_polls(counters["samples"], *computing)
        assert len(polls) >= 10, (rnd["round"], computing, polls)
        poll = float(np.percentile(np.diff(polls), 90))
        held = client["collected_s"] - client["last_byte_s"]
        # Each instant is known to a counter sample: the sampler's own gaps there (10 ms, more when late).
        t = np.array([s[0] for s in counters["samples"]])
        near = t[(t >= push + client["last_byte_s"] - 0.1) & (t <= push + client["collected_s"] + 0.1)]
        edges = 2 * float(np.diff(near).max()) if len(near) > 1 else 0.0
        print(f"round {rnd['round']}: pulled {held:.3f} s after the last byte; the ServerApp's poll {poll:.3f} s "
              f"({len(polls)} while the client computed); samples {edges / 2 * 1000:.0f} ms apart at most")
        # Below zero is measurement, not a reply taken early: both are 10-ms counter samples, and a loaded
        # 2-core machine schedules the sampler late by a few samples. Above: the poll that finds the last
        # object stored, or the next (the last byte is in a moment before the SuperLink has stored it).
        assert -0.3 < held <= 2 * poll + edges, (
            f"round {rnd['round']}: the reply was pulled {held:.2f} s after its last byte, more than two of "
            f"the ServerApp's polls ({poll:.3f} s each in this round; the round closed "
            f"{rnd['round_s'] - client['last_byte_s']:.2f} s after the last byte)")
