"""Propagation delay for the shaped star without ``netem``: a TCP relay that holds every chunk of bytes
for a fixed one-way delay in each direction, so a connection through it has its RTT grown by 2 × delay.

It runs in a *client* namespace (``start_relay``): the SuperNode connects to ``127.0.0.1:RELAY_PORT``
there, and the relay forwards each connection to the SuperLink at the hub over the client's shaped
veth. So the hub's interfaces (the bench's byte counters, the ServerApp's pushes on the hub's
loopback) see exactly what they saw without it, and the relay sees the client's side of the exchange:
it logs, per chunk, when bytes left the SuperNode and when they were handed to it (``--log``), which is
what the bench reads the client's own download end and upload start from.

What it models: a constant one-way delay on every byte, in both directions, in order. The relay reads
as fast as bytes come and buffers without limit, so it never limits throughput (``tbf`` stays the rate
limit) and, since the TCP connection on the shaped veth still has the veth's sub-millisecond RTT, TCP's
own slow start and window do not see the delay; flow control above TCP (HTTP/2 windows, gRPC's
pings, request/response turns) does. Not modelled: loss, per-packet jitter, the delay of the TCP
handshake itself (the relay accepts and connects at once; gRPC keeps one connection open).

Stdlib only: ``python relay.py --listen HOST:PORT --target HOST:PORT --delay-ms D [--log FILE]``.
"""

from __future__ import annotations

import argparse
import collections
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # types only: the relay itself runs without fedgc
    from fedgc.shaped.netns import Star
    from fedgc.shaped.processes import NamespaceProcess
    from fedgc.shaped.traffic import Flow

RELAY_PORT = 9190  # inside a client namespace, so a fixed port cannot collide
CHUNK = 65536


class _Pipe:
    """One direction of one connection: a reader that stamps chunks as they arrive and a writer that
    sends each at its stamp + delay. A FIFO, so bytes stay in order; an empty chunk is the sender's EOF."""

    def __init__(self, src: socket.socket, dst: socket.socket, delay_s: float, name: str, relay: Relay,
                 done: threading.Semaphore) -> None:
        self.src, self.dst, self.delay_s, self.name, self.relay = src, dst, delay_s, name, relay
        self.done = done  # released when this direction is finished; the second release closes both
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.ready = threading.Condition()
        self.threads = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=self._write, daemon=True)]

    def _read(self) -> None:
        while True:
            try:
                data = self.src.recv(CHUNK)
            except OSError:
                data = b""
            now = time.monotonic()
            if data and self.name == "up":  # bytes that left the SuperNode (client side, before the delay)
                self.relay.record(time.time(), "up", len(data))
            with self.ready:
                self.queue.append((now + self.delay_s, data))
                self.ready.notify()
            if not data:
                return

    def _write(self) -> None:
        waited = True
        while True:
            with self.ready:
                while not self.queue:
                    self.ready.wait()
                    waited = True
                due, data = self.queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self.ready.wait(wait)  # woken early by a new chunk: check the head again
                    waited = True
                    continue
                self.queue.popleft()
            # The relay's own latency: how late a chunk leaves when the writer was waiting for it. A chunk
            # already due when the previous send returned queued behind the link (tbf), not the relay.
            if waited:
                self.relay.late(time.monotonic() - due)
            waited = False
            if not data:
                self._finish(socket.SHUT_WR)  # pass the half-close on, after the delay
                return
            try:
                self.dst.sendall(data)
            except OSError:
                self._finish(socket.SHUT_RDWR)  # the other end is gone: wake this direction's reader too
                return
            if self.name == "down":  # bytes handed to the SuperNode (client side, after the delay)
                self.relay.record(time.time(), "down", len(data))

    def _finish(self, how: int) -> None:
        for sock, flag in ((self.dst, how), (self.src, socket.SHUT_RD if how == socket.SHUT_WR else how)):
            try:
                sock.shutdown(flag)
            except OSError:
                pass
        if not self.done.acquire(blocking=False):  # the other direction finished first: close the pair
            self.src.close()
            self.dst.close()


class Relay:
    """Listens on ``listen``, forwards each connection to ``target`` with ``delay_s`` each way."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], delay_s: float) -> None:
        self.target, self.delay_s = target, delay_s
        self.server = socket.create_server(listen, reuse_port=False)
        self.events: list[tuple[float, str, int]] = []  # (time.time(), "up"/"down", bytes) at the client side
        self.lateness: list[float] = []  # s each chunk left after its due time: the relay's own latency
        self._lock = threading.Lock()

    def record(self, t: float, direction: str, nbytes: int) -> None:
        with self._lock:
            self.events.append((t, direction, nbytes))

    def late(self, seconds: float) -> None:
        with self._lock:
            self.lateness.append(seconds)

    def serve(self) -> None:
        while True:
            client, _ = self.server.accept()
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # the delay is ours, not Nagle's
            done = threading.Semaphore(1)
            for pipe in (_Pipe(client, upstream, self.delay_s, "up", self, done),
                         _Pipe(upstream, client, self.delay_s, "down", self, done)):
                for thread in pipe.threads:
                    thread.start()

    def write_log(self, path: Path) -> None:
        with self._lock:
            events, lateness = list(self.events), sorted(self.lateness)
        lines = [f"{t:.6f} {d} {n}" for t, d, n in events]
        if lateness:
            lines.insert(0, f"# lateness_s mean {sum(lateness) / len(lateness):.6f} "
                            f"p99 {lateness[int(0.99 * (len(lateness) - 1))]:.6f} max {lateness[-1]:.6f} "
                            f"chunks {len(lateness)}")
        path.write_text("\n".join(lines) + "\n")


def read_log(path: Path) -> tuple[list[tuple[float, str, int]], dict[str, float]]:
    """(events, lateness summary) from a relay's ``--log`` file."""
    events, summary = [], {}
    for line in path.read_text().splitlines():
        if line.startswith("# lateness_s"):
            fields = line.split()[2:]
            summary = {fields[i]: float(fields[i + 1]) for i in range(0, len(fields), 2)}
        elif line:
            t, d, n = line.split()
            events.append((float(t), d, int(n)))
    return events, summary


def event_flows(events: list[tuple[float, str, int]], direction: str, gap_s: float, min_bytes: int) -> list[Flow]:
    """Flows of one direction of a relay's log: chunks no more than ``gap_s`` apart, first to last chunk."""
    from fedgc.shaped.traffic import Flow  # here: the relay itself runs without fedgc

    flows: list[Flow] = []
    start = end = None
    total = 0
    for t, d, nbytes in events:
        if d != direction:
            continue
        if start is not None and t - cast(float, end) > gap_s:  # cast: end is set whenever start is
            flows.append(Flow(start, cast(float, end), total))
            start = None
        if start is None:
            start, total = t, 0
        end, total = t, total + nbytes
    if start is not None:
        flows.append(Flow(start, cast(float, end), total))  # cast: end is set whenever start is
    return [f for f in flows if f.nbytes >= min_bytes]


def start_relay(star: Star, namespace: str, target: str, delay_ms: float, workdir: Path, env: dict[str, str],
                name: str, timeout_s: float = 15.0) -> NamespaceProcess:
    """A relay process in ``namespace`` on ``127.0.0.1:RELAY_PORT`` → ``target`` (``HOST:PORT``),
    registered with ``star`` so ``Star.close()`` stops it (its log is written on SIGTERM). Returns the
    ``NamespaceProcess`` once it listens; its event log is ``workdir/NAME.events``."""
    from fedgc.shaped.processes import NamespaceProcess  # here: the relay itself runs without fedgc

    command = [sys.executable, str(Path(__file__).resolve()), "--listen", f"127.0.0.1:{RELAY_PORT}",
               "--target", target, "--delay-ms", str(delay_ms), "--log", str(workdir / f"{name}.events")]
    process = NamespaceProcess(namespace, command, workdir / f"{name}.log", env, workdir)
    star.processes.append(process)
    deadline = time.monotonic() + timeout_s
    while "listening" not in process.log_tail():
        if not process.running():
            raise RuntimeError(f"relay in {namespace} exited:\n{process.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"relay in {namespace} not listening within {timeout_s:.0f} s")
        time.sleep(0.05)
    return process


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="TCP relay adding a fixed one-way delay each way")
    parser.add_argument("--listen", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--log", help="write the client-side chunk times and the relay's lateness here on exit")
    args = parser.parse_args(argv)
    relay = Relay(_address(args.listen), _address(args.target), args.delay_ms / 1000.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwind to the finally below: the log is written
    print(f"listening on {args.listen}, forwarding to {args.target}, {args.delay_ms} ms each way", flush=True)
    try:
        relay.serve()
    finally:
        if args.log:
            relay.write_log(Path(args.log))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
