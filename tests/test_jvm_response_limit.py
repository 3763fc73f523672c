"""The JVM SuperNode reads no Fleet answer larger than its maximum (``FleetClient``, clients/jvm/README.md).

A fake Fleet server on 127.0.0.1 (``http.server``, Flower's own protobuf classes for the SuperNode's
answers) serves what a hostile or broken SuperLink could: an answer one byte over the maximum, one
without a ``Content-Length`` that never ends, one that declares 10^12 bytes, an HTTP error whose body
never ends, and a SuperNode's PullMessages answered with 10^12 declared bytes.
``fedgc.supernode.ResponseLimitCheck`` (the Java side, heap capped at 48 MB) states what the client
does with each; this side checks that the server was never read much past the maximum.
"""

from __future__ import annotations

import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from .test_jvm_client import JAR, TESTS_JAR, jar  # noqa: F401  (the fixture: make jvm, or skip)

pytestmark = pytest.mark.jvm

LIMIT = 1 << 20  # ResponseLimitCheck.LIMIT
HUGE = 10**12
BLOCK = b"\0" * 65536


def exact_answer(size: int) -> bytes:
    """A valid protobuf of exactly ``size`` bytes: one field unknown to every Fleet answer (15, bytes)."""
    for digits in range(1, 6):
        payload = size - 1 - digits
        length = bytearray()
        value = payload
        while True:
            length.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
            value >>= 7
            if not value:
                break
        if len(length) == digits:
            return bytes([15 << 3 | 2]) + bytes(length) + b"\0" * payload
    raise ValueError(size)


class FakeFleet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sent: ClassVar[dict[str, int]] = {}  # bytes of each endless answer written before the client hung up

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        from flwr.proto.fleet_pb2 import ActivateNodeResponse
        from flwr.proto.heartbeat_pb2 import SendNodeHeartbeatResponse

        self.rfile.read(int(self.headers.get("content-length", 0)))
        method = self.path.rsplit("/", 1)[-1]
        if method == "exact":
            self.answer(200, exact_answer(LIMIT))
        elif method == "one-over":
            self.answer(200, exact_answer(LIMIT + 1))
        elif method == "endless":
            self.endless(method, 200, chunked=True)
        elif method in ("declares-huge", "pull-messages"):
            self.endless(method, 200, declared=HUGE)
        elif method == "error-endless":
            self.endless(method, 500, chunked=True)
        elif method == "activate-node":
            self.answer(200, ActivateNodeResponse(node_id=5).SerializeToString())
        elif method == "send-node-heartbeat":
            self.answer(200, SendNodeHeartbeatResponse(success=True).SerializeToString())
        else:  # register, deactivate, unregister: an empty answer
            self.answer(200, b"")

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/protobuf")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # a client that refuses the answer hangs up before its end
            self.close_connection = True

    def endless(self, method: str, status: int, *, chunked: bool = False, declared: int | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/protobuf")
        self.send_header("transfer-encoding" if chunked else "content-length", "chunked" if chunked else str(declared))
        self.end_headers()
        frame = f"{len(BLOCK):x}\r\n".encode() + BLOCK + b"\r\n" if chunked else BLOCK
        sent = 0
        try:
            while sent < 4 * 1024**3:  # never more than 4 GiB, whatever the client does
                self.wfile.write(frame)
                sent += len(BLOCK)
        except OSError:  # the client hung up: what it refused is not read
            pass
        finally:
            FakeFleet.sent[method] = max(FakeFleet.sent.get(method, 0), sent)
            self.close_connection = True


@pytest.fixture
def fleet():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeFleet)
    server.daemon_threads = True
    FakeFleet.sent = {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_answer_over_the_maximum_is_refused_without_reading_it(jar, fleet, tmp_path):  # noqa: F811
    done = subprocess.run(["java", "-Xmx48m", "-cp", f"{JAR}:{TESTS_JAR}", "fedgc.supernode.ResponseLimitCheck", fleet,
                           str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "response limit ok" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "OutOfMemoryError" not in done.stderr
    # The client stopped reading at its maximum (1 MiB; the default one never read): what the server
    # managed to write is the maximum plus the sockets' buffers, not the 4 GiB it offered.
    assert set(FakeFleet.sent) >= {"endless", "declares-huge", "error-endless", "pull-messages"}
    for method, sent in FakeFleet.sent.items():
        assert sent < 32 * 1024**2, (method, sent)


def test_the_exact_answer_helper_makes_the_size_asked():
    from flwr.proto.fleet_pb2 import PullMessagesResponse

    for size in (3, 1000, LIMIT, LIMIT + 1):
        body = exact_answer(size)
        assert len(body) == size
        PullMessagesResponse.FromString(body)  # a valid answer: an unknown field is kept, not an error
