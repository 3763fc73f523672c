"""The shaped-network harness (``fedgc.shaped``), for real: namespaces, veth pairs, ``tbf`` and ``tc qdisc
change``. A known payload crosses a shaped link in the time its rate says (within 10 %), both ways and
under a replayed trace, also through the delaying relay (which adds its delay to the RTT); everything
the harness made is gone afterwards, also when the body raises.
Skipped, with the reason, where namespaces or tc cannot be used (not root, no iproute2)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from fedgc.network.piecewise import PeriodicRate
from fedgc.shaped import FRAME_OVERHEAD, Star, namespaces_with, unavailable_reason
from fedgc.shaped.processes import NamespaceProcess
from fedgc.shaped.relay import RELAY_PORT, read_log, start_relay
from fedgc.shaped.replay import TraceReplay
from fedgc.shaped.traffic import CounterSampler

REASON = unavailable_reason()
pytestmark = [pytest.mark.netns, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

SEND = """import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000)); s.listen(); c, _ = s.accept(); c.sendall(b"x" * int(sys.argv[1])); c.close()"""
RECEIVE = """import socket, sys, time
s = socket.create_connection((sys.argv[1], 7000)); t = time.time(); n = 0
while (b := s.recv(65536)): n += len(b)
print(n, time.time() - t)"""
# Connects, says so, then prints the bytes it read and the wall-clock time the last one came.
RECEIVE_AFTER_READY = """import socket, sys, time
s = socket.create_connection((sys.argv[1], 7000)); print("connected", flush=True); n = 0
while (b := s.recv(65536)): n += len(b)
print(n, time.time())"""


# In the hub: per line "ping 0" -> "p"; "send N" -> N bytes; "recv N" -> reads N bytes, then "k".
SERVE = """import socket, threading
s = socket.create_server(("0.0.0.0", 7001))
def handle(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); f = c.makefile("rb")
    while (line := f.readline()):
        cmd, n = line.split(); n = int(n)
        if cmd == b"ping": c.sendall(b"p\\n")
        elif cmd == b"send": c.sendall(b"x" * n)
        else:
            got = 0
            while got < n: got += len(f.read1(65536))
            c.sendall(b"k\\n")
    c.close()
while True: threading.Thread(target=handle, args=(s.accept()[0],), daemon=True).start()"""
# In the client namespace, through the relay: median ping RTT, then "send" and "recv" timed from the
# request written to the last byte read (download) or to the "k" (upload).
ASK = """import socket, statistics, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
f = s.makefile("rb"); rtts = []
for _ in range(10):
    t = time.perf_counter(); s.sendall(b"ping 0\\n"); f.readline(); rtts.append(time.perf_counter() - t)
down, up = int(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter(); s.sendall(b"send %d\\n" % down); got = 0
while got < down: got += len(f.read1(65536))
d = time.perf_counter() - t
t = time.perf_counter(); s.sendall(b"recv %d\\n" % up + b"y" * up); f.readline()
print(statistics.median(rtts), d, time.perf_counter() - t)"""


def transfer(star: Star, tmp_path, nbytes: int, direction: str) -> float:
    """Seconds for ``nbytes`` to go from the hub to client 0 (``down``) or back (``up``), measured by
    the receiver from its first byte asked to its last byte read."""
    link = star.clients[0]
    sender_ns, receiver_ns, address = ((star.hub, link.namespace, link.hub_address) if direction == "down"
                                       else (link.namespace, star.hub, link.address))
    sender = NamespaceProcess(sender_ns, [sys.executable, "-c", SEND, str(nbytes)], tmp_path / "send.log",
                              dict(os.environ))
    star.processes.append(sender)
    time.sleep(0.5)  # listening
    out = subprocess.run(["ip", "netns", "exec", receiver_ns, sys.executable, "-c", RECEIVE, address],
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert int(out[0]) == nbytes
    return float(out[1])


def test_a_payload_crosses_a_shaped_link_at_its_rate(tmp_path):
    with Star([(4.0, 8.0)]) as star:
        down = transfer(star, tmp_path, 2_000_000, "down")  # 2 s at 8 Mbit/s
        up = transfer(star, tmp_path, 1_000_000, "up")  # 2 s at 4 Mbit/s
    assert down == pytest.approx(2.0, rel=0.10)
    assert up == pytest.approx(2.0, rel=0.10)


def test_the_byte_counters_see_the_transfer(tmp_path):
    with Star([(8.0, 8.0)]) as star:
        anchor = NamespaceProcess(star.hub, ["sleep", "600"], tmp_path / "anchor.log", dict(os.environ))
        star.processes.append(anchor)
        with CounterSampler(anchor.pid, [star.clients[0].hub_dev]) as sampler:
            transfer(star, tmp_path, 3_000_000, "down")  # 3 s at 8 Mbit/s
        flows = sampler.flows(star.clients[0].hub_dev, "tx", min_bytes=1_000_000)
        # Without small packets (the handshake, neighbour discovery) as activity: the transfer alone.
        data = sampler.flows(star.clients[0].hub_dev, "tx", min_bytes=1_000_000, min_step=1448)
    assert len(flows) == 1 and len(data) == 1
    # The frames carry the payload plus TCP/IP and Ethernet headers (FRAME_OVERHEAD); the flow starts
    # with the connection's handshake, or earlier with a small packet less than 0.3 s before it.
    assert 3_000_000 <= flows[0].nbytes <= 3_000_000 * FRAME_OVERHEAD * 1.01
    assert 3_000_000 <= data[0].nbytes <= flows[0].nbytes
    assert data[0].duration == pytest.approx(3.0, rel=0.10)


def test_a_replayed_trace_changes_the_rate_on_schedule(tmp_path):
    # 1 s at 16 Mbit/s, then 2 Mbit/s: 3 MB take 1 s (2 MB) + 4 s (the last 1 MB), from the replay's start.
    # The receiver is connected before the replay starts (at the star's 1 Mbit/s meanwhile, a few kB), so
    # a receiver that a loaded machine starts late does not lose the fast second: the time is read from
    # the replay's start to the last byte (a late start cost 7 s per s of delay, 5.56 s seen in CI).
    curve = PeriodicRate(np.array([0.0, 1.0, 60.0]), np.array([16e6, 2e6]), "two-step")
    with Star([(1.0, 1.0)]) as star:
        replay = TraceReplay(star, [(curve, curve)])
        link = star.clients[0]
        sender = NamespaceProcess(star.hub, [sys.executable, "-c", SEND, "3000000"], tmp_path / "send.log",
                                  dict(os.environ))
        star.processes.append(sender)
        time.sleep(0.5)
        with subprocess.Popen(["ip", "netns", "exec", link.namespace, sys.executable, "-c", RECEIVE_AFTER_READY,
                               link.hub_address], stdout=subprocess.PIPE, text=True) as receiver:
            assert receiver.stdout.readline().strip() == "connected"
            replay.start()
            out = receiver.communicate(timeout=60)[0].split()
        replay.stop()
    assert receiver.returncode == 0 and int(out[0]) == 3_000_000
    assert replay.changes >= 2
    assert float(out[1]) - replay.t0 == pytest.approx(5.0, rel=0.10)


def test_everything_made_is_removed_also_when_the_body_raises(tmp_path):
    with pytest.raises(RuntimeError, match="planted"), Star([(2.0, 2.0), (2.0, 2.0)]) as star:
        tag = star.tag
        process = NamespaceProcess(star.clients[1].namespace, ["sleep", "600"], tmp_path / "s.log",
                                   dict(os.environ))
        star.processes.append(process)
        relay = start_relay(star, star.clients[0].namespace, "10.200.0.1:7001", 50.0, tmp_path, dict(os.environ),
                            "relay")
        assert len(namespaces_with(tag)) == 3
        raise RuntimeError("planted")
    assert namespaces_with(tag) == []
    assert process.process.poll() is not None and process.members() == []
    assert not relay.running() and relay.members() == []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert tag not in links


def test_the_relay_adds_its_delay_to_the_rtt_and_keeps_the_link_rate(tmp_path):
    delay_ms, down, up = 50.0, 1_000_000, 500_000  # 1 s at 8 Mbit/s down, 1 s at 4 Mbit/s up
    with Star([(4.0, 8.0)]) as star:
        link = star.clients[0]
        star.processes.append(NamespaceProcess(star.hub, [sys.executable, "-c", SERVE], tmp_path / "serve.log",
                                               dict(os.environ)))
        time.sleep(0.5)  # listening
        relay = start_relay(star, link.namespace, f"{link.hub_address}:7001", delay_ms, tmp_path, dict(os.environ),
                            "relay")
        out = subprocess.run(["ip", "netns", "exec", link.namespace, sys.executable, "-c", ASK, str(RELAY_PORT),
                              str(down), str(up)], capture_output=True, text=True, timeout=60, check=True)
        rtt, down_s, up_s = map(float, out.stdout.split())
        print(f"relay {delay_ms} ms each way: RTT {rtt * 1000:.2f} ms, {down} B down {down_s:.3f} s, "
              f"{up} B up {up_s:.3f} s")
    assert not relay.running() and relay.members() == []
    events, lateness = read_log(tmp_path / "relay.events")
    # The RTT is the veth's (well under 1 ms) plus 2 x the delay plus the relay's own latency.
    assert 2 * delay_ms / 1000 <= rtt <= 1.1 * 2 * delay_ms / 1000
    assert lateness["mean"] < 0.005 and lateness["chunks"] > 10
    # A request for N bytes: one RTT (request up, first byte down) plus the bytes at the link's rate.
    assert down_s == pytest.approx(down * 8 / 8e6 + rtt, rel=0.10)
    assert up_s == pytest.approx(up * 8 / 4e6 + rtt, rel=0.10)
    # The relay logged the client's side of the exchange: every byte it handed over and took in.
    assert sum(n for _, d, n in events if d == "down") == 10 * len(b"p\n") + down + len(b"k\n")
    assert sum(n for _, d, n in events if d == "up") == len(b"ping 0\n") * 10 + len(b"send %d\n" % down) \
        + len(b"recv %d\n" % up) + up
