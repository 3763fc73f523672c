"""A star of Linux network namespaces: one hub (the server's) and one per client, joined by veth pairs,
each client's link shaped in both directions with ``tbf``.

Client ``i`` (0-based) is ``10.200.i.2`` in its own namespace and reaches the hub at ``10.200.i.1``; the
hub-side end of its veth carries its downloads out (shaped to ``down_mbps``), the client-side end its
uploads (shaped to ``up_mbps``). Every name starts with a per-run tag (``fgc`` + the pid in hex + a
counter), so runs never collide and what a run made can be found and removed: ``close()`` (also
called by ``with`` on any exception) stops every process started in the namespaces, then deletes them,
which removes their veths and qdiscs. Only addresses inside these namespaces are used.

Rates are *goodput*, as speed tests and the network model's profiles state them: ``tbf`` counts
whole Ethernet frames, so the rate it is given is the goodput times ``FRAME_OVERHEAD`` (a 1514-byte
frame carries 1448 bytes of TCP payload with timestamps).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedgc.runs.process_guard import shared_guard

if TYPE_CHECKING:
    from fedgc.shaped.processes import NamespaceProcess

FRAME_OVERHEAD = 1514 / 1448
TBF_LATENCY = "400ms"  # the queue tbf keeps (as time at the current rate) before dropping
_counter = itertools.count()


class ShapingUnavailable(RuntimeError):
    """This machine cannot build shaped namespaces (one-line reason)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


def _tc(namespace: str, *args: str) -> None:
    result = subprocess.run(["tc", "-n", namespace, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"tc -n {namespace} {' '.join(args)}: {result.stderr.strip() or result.returncode}")


def burst_bytes(mbps: float) -> int:
    """The token bucket for ``mbps``: 10 ms at the rate, at least two frames."""
    return max(3028, int(mbps * 1e6 * FRAME_OVERHEAD / 8 * 0.01))


def tbf_args(mbps: float, burst: int | None = None) -> list[str]:
    """``tbf`` parameters for a goodput of ``mbps`` Mbit/s: the frame rate, a bucket of ``burst``
    bytes (default ``burst_bytes(mbps)``) and a queue of ``TBF_LATENCY``."""
    if not mbps > 0:
        raise ValueError(f"a shaped link needs a rate > 0 Mbit/s, got {mbps}")
    bits = mbps * 1e6 * FRAME_OVERHEAD
    return ["rate", f"{bits:.0f}bit", "burst", str(burst or burst_bytes(mbps)), "latency", TBF_LATENCY]


def unavailable_reason() -> str | None:
    """None when namespaces, veths and tbf can be made here, else a one-line reason."""
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "shaped namespaces need root (ip netns, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"shaped namespaces need the {tool!r} command (iproute2)"
    probe = f"fgc{os.getpid():x}p"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        _ip("-n", probe, "link", "add", probe + "a", "type", "veth", "peer", "name", probe + "b")
        _tc(probe, "qdisc", "add", "dev", probe + "a", "root", "tbf", *tbf_args(1.0))
    except RuntimeError as error:
        return f"veth or tbf unavailable: {error}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def namespaces_with(tag: str) -> list[str]:
    """Namespaces whose name starts with ``tag`` (what a run with that tag left, if anything)."""
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].startswith(tag)]


@dataclass(frozen=True)
class ClientLink:
    index: int
    namespace: str
    hub_dev: str  # in the hub namespace: carries the downloads (shaped to down_mbps)
    dev: str  # in the client namespace: carries the uploads (shaped to up_mbps)
    hub_address: str
    address: str


class Star:
    """The hub namespace and ``n`` client namespaces, shaped to ``rates[i] = (up_mbps, down_mbps)``."""

    def __init__(self, rates: list[tuple[float, float]]) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise ShapingUnavailable(reason)
        if not 1 <= len(rates) <= 200:
            raise ValueError(f"a shaped star has 1 to 200 clients, got {len(rates)}")
        self.tag = f"fgc{os.getpid():x}{next(_counter)}"
        self.hub = self.tag + "s"
        self.clients: list[ClientLink] = []
        self.processes: list[NamespaceProcess] = []  # stopped first by close()
        self._made: list[str] = []
        self._bursts: dict[tuple[int, str], int] = {}
        try:
            self._add_namespace(self.hub)
            for i, (up, down) in enumerate(rates):
                link = ClientLink(i, f"{self.tag}c{i}", f"{self.tag}h{i}", f"{self.tag}n{i}",
                                  f"10.200.{i}.1", f"10.200.{i}.2")
                self._add_namespace(link.namespace)
                _ip("-n", self.hub, "link", "add", link.hub_dev, "type", "veth", "peer", "name", link.dev,
                    "netns", link.namespace)
                _ip("-n", self.hub, "addr", "add", link.hub_address + "/24", "dev", link.hub_dev)
                _ip("-n", link.namespace, "addr", "add", link.address + "/24", "dev", link.dev)
                _ip("-n", self.hub, "link", "set", link.hub_dev, "up")
                _ip("-n", link.namespace, "link", "set", link.dev, "up")
                self.clients.append(link)
                self.set_rate(i, up, down, add=True)
        except BaseException:
            self.close()
            raise

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)
        shared_guard().watch_namespace(name)  # deleted by the guard if this process is killed
        _ip("-n", name, "link", "set", "lo", "up")

    def set_rate(self, index: int, up_mbps: float | None, down_mbps: float | None, *, add: bool = False) -> None:
        """Shape client ``index``'s uplink and/or downlink (``tc qdisc change``; None leaves it).

        A link's bucket never shrinks: packets queued under a bigger bucket (veth hands tbf segments of
        several frames) could never be sent through a smaller one, and the link would stall."""
        link = self.clients[index]
        verb = "add" if add else "change"
        for mbps, namespace, dev, key in ((down_mbps, self.hub, link.hub_dev, "down"),
                                          (up_mbps, link.namespace, link.dev, "up")):
            if mbps is None:
                continue
            burst = max(burst_bytes(mbps), self._bursts.get((index, key), 0))
            self._bursts[index, key] = burst
            _tc(namespace, "qdisc", verb, "dev", dev, "root", "tbf", *tbf_args(mbps, burst))

    def close(self) -> None:
        """Stop every process started in the namespaces, then delete the namespaces (veths and qdiscs go
        with them). Safe to call twice."""
        errors = []
        for process in reversed(self.processes):
            try:
                process.stop()
            except Exception as error:  # noqa: BLE001 — keep removing the rest
                errors.append(str(error))
        self.processes.clear()
        for name in reversed(self._made):
            result = _ip("netns", "del", name, check=False)
            if result.returncode != 0 and name in namespaces_with(name):
                errors.append(f"ip netns del {name}: {result.stderr.strip()}")
            else:
                shared_guard().release_namespace(name)
        self._made.clear()
        if errors:
            raise RuntimeError("shaped star cleanup: " + "; ".join(errors))

    def __enter__(self) -> Star:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
