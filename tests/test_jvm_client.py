"""The JVM SuperNode (clients/jvm/) against Flower 1.41–1.42, for real.

- ``make jvm`` builds the jar from the committed schema, which must be the installed flwr's
  (``gen_proto.py --check``).
- Object ids: Python's flwr deflates two messages (arrays chunked and deduplicated, every ConfigRecord
  and MetricRecord value type, non-ASCII keys, an error reply); the Java self-check must read them, get
  the very same objects when it deflates them again, and the same ids when it builds the same messages
  from scratch. A message that differs must fail it.
- End to end: an insecure ``flower-superlink`` on 127.0.0.1 (started after the JVM client, which must
  retry until it is up), the JVM client as its only SuperNode, and
  a tiny ServerApp run with ``flwr run`` that sends one message (an ArrayRecord with a 6 MB array, i.e.
  two chunks, and a ConfigRecord) and checks nothing itself: it saves the reply, and this test asserts
  the JVM's EchoHandler answer exactly (arrays 2x+1, the ConfigRecord unchanged, its MetricRecord).
  SIGTERM must then deactivate and unregister the node.
- The same over TLS with SuperNode authentication (an ssh-keygen key registered with
  ``flwr supernode register``); an unregistered key is refused.
Skipped, with one line, only where no JDK/protoc/protobuf-java is installed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tomli_w

from fedgc.flower.runtime.runtime_processes import (
    ManagedProcess,
    flower_env,
    flwr_run,
    free_port,
    script,
    start_superlink,
    write_connection,
)

from .conftest import REPO

JVM = REPO / "clients" / "jvm"
JAR = JVM / "build" / "fedgc-client.jar"
TESTS_JAR = JVM / "build" / "fedgc-client-tests.jar"
PROTOBUF_JAR = Path(os.environ.get("PROTOBUF_JAR", "/usr/share/java/protobuf.jar"))


@pytest.fixture(scope="module")
def jar() -> Path:
    missing = [tool for tool in ("java", "javac", "jar", "protoc") if shutil.which(tool) is None]
    missing += [] if PROTOBUF_JAR.is_file() else [str(PROTOBUF_JAR)]
    if missing:
        pytest.skip(f"needs a JDK, protoc and protobuf-java ({', '.join(missing)} missing): "
                    "apt-get install openjdk-17-jdk-headless protobuf-compiler libprotobuf-java")
    # One `make jvm` at a time: under pytest-xdist every worker with a JVM test asks for the jar, and
    # build.sh empties build/classes and build/gen before it compiles; the others wait, then find it made.
    JAR.parent.mkdir(parents=True, exist_ok=True)
    with open(JAR.parent / ".make-jvm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = subprocess.run(["make", "jvm"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert JAR.is_file() and TESTS_JAR.is_file()
    return JAR


def test_the_sdk_compiles_without_the_app(jar, tmp_path):
    """The Flower SuperNode SDK (``fedgc.supernode``) is a layer of its own: its sources and Flower's
    generated classes compile alone, without fedgc's app (``fedgc.client``) or its ``wire``,
    ``compress`` and ``train`` packages; and no SDK source names them."""
    sdk = JVM / "src" / "main" / "java" / "fedgc" / "supernode"
    sources = sorted(str(p) for p in (JVM / "build" / "gen").rglob("*.java")) + sorted(str(p) for p in sdk.glob("*.java"))
    result = subprocess.run(["javac", "--release", "8", "-nowarn", "-encoding", "UTF-8", "-cp", str(PROTOBUF_JAR),
                             "-d", str(tmp_path), *sources], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    for path in sdk.glob("*.java"):
        code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith(("*", "/*", "//")))
        for app in ("fedgc.client", "fedgc.wire", "fedgc.compress", "fedgc.train"):
            assert app not in code, f"{path.name} uses {app}"


def test_committed_schema_is_the_installed_flwrs():
    result = subprocess.run([sys.executable,
                             str(JVM / "gen_proto.py"), "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


# ----------------------------------------------------------------------------- object ids


def selfcheck_messages(lr: float = 0.1):
    """The two messages of clients/jvm/src/test/java/fedgc/supernode/SelfCheck.java, built with flwr."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, Error, Message, MetricRecord, RecordDict
    from flwr.app.metadata import Metadata

    arrays = ArrayRecord({
        'w"1': Array(np.arange(6, dtype=np.float32).reshape(2, 3) / np.float32(4)),
        "ids": Array(np.array([7, -8, 2**40], dtype=np.int64)),
        "zeros": Array(np.zeros(4_000_000, dtype=np.float32)),  # 16 MB: 4 chunks, two of them identical
        "ramp": Array(np.arange(1_000_000, dtype=np.float64) * 0.5),
        "scalar": Array(np.array(3.5)),
    })
    config = ConfigRecord({"lr": lr, "epochs": 3, "name": 'fedgc ✓ "q"\n', "flag": True, "blob": b"\x00\xff",
                           "floats": [1.0, -2.5], "ints": [1, -2], "bools": [True], "strs": ["a", "é"],
                           "blobs": [b"x"], "big": 2**64 - 1, "empty": []})
    metrics = MetricRecord({"acc": 0.9, "n": 10, "hist": [1, 2, 3], "curve": [0.5, 0.25], "huge": 2**63})
    content = Message(
        metadata=Metadata(run_id=1234567890123, message_id="", src_node_id=1, dst_node_id=2**63 + 5,
                          reply_to_message_id="", group_id="7", created_at=1767225600.25, ttl=3600.0,
                          message_type="train", src_task_id=11),
        content=RecordDict({"arrays": arrays, "config": config, "métriques ✓": metrics}))
    error = Message(
        metadata=Metadata(run_id=1234567890123, message_id="", src_node_id=2**63 + 5, dst_node_id=1,
                          reply_to_message_id="ab" * 32, group_id="7", created_at=1767225601.5, ttl=1800.0,
                          message_type="train", dst_task_id=11),
        error=Error(code=2, reason="boom ✓"))
    return content, error


def run_selfcheck(tmp_path: Path, lr: float) -> subprocess.CompletedProcess:
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    objects = tmp_path / "objects"
    objects.mkdir()
    manifest: dict = {"npy": {'w"1': 1, "ids": 1, "scalar": 1}}
    for name, message in zip(("content", "error"), selfcheck_messages(lr)):
        for object_id, obj in get_all_nested_objects(message).items():
            (objects / object_id).write_bytes(obj.deflate())
        manifest[name] = message.object_id
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return subprocess.run(["java", "-cp", f"{JAR}{os.pathsep}{TESTS_JAR}", "fedgc.supernode.SelfCheck", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_java_object_ids_equal_flwrs(jar, tmp_path):
    result = run_selfcheck(tmp_path, lr=0.1)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "selfcheck ok" in result.stdout
    assert "content: 18 objects" in result.stdout  # 1 message, 1 record dict, 3 records, 5 arrays, 8 chunks


def test_java_selfcheck_fails_on_a_different_message(jar, tmp_path):
    result = run_selfcheck(tmp_path, lr=0.2)  # Java builds lr = 0.1
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL: content: Java built id" in result.stdout


# ----------------------------------------------------------------------------- command line


def test_command_line_errors_are_one_line(jar):
    bad = subprocess.run(["java", "-jar", str(jar), "--superlink", "nowhere"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert bad.returncode == 2 and bad.stderr.splitlines()[0] == "error: --superlink must be HOST:PORT, got 'nowhere'"
    bad_config = subprocess.run(["java", "-jar", str(jar), "--superlink", "127.0.0.1:9", "--insecure",
                                 "--node-config", "partition-id=0 oops"], capture_output=True, text=True, timeout=60,
                                check=False)
    assert bad_config.returncode == 2 and bad_config.stderr.splitlines()[0] == "error: --node-config: cannot read 'oops'"
    unreachable = subprocess.run(["java", "-jar", str(jar), "--superlink", f"127.0.0.1:{free_port()}", "--insecure",
                                  "--max-wait-time", "1"], capture_output=True, text=True, timeout=60, check=False)
    assert unreachable.returncode == 1
    assert "Failed to initialize the connection to the SuperLink: ConnectException" in unreachable.stderr


# ----------------------------------------------------------------------------- end to end

SERVER_APP = '''\
"""One message to the JVM SuperNode; the reply is saved for tests/test_jvm_client.py to check."""
import json
import time
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

app = ServerApp()
clientapp = ClientApp()  # a Flower app names one; the JVM node does not run it


def sent_content() -> RecordDict:
    return RecordDict({
        "arrays": ArrayRecord({
            "w": Array(np.arange(6, dtype=np.float32).reshape(2, 3) / np.float32(4) - 0.3),
            "big": Array(np.linspace(-1.0, 1.0, 1_500_000, dtype=np.float32)),  # 6 MB: two chunks
            "b": Array(np.array([1.5, -2.25, 1e-300])),
            "steps": Array(np.array([7, 8], dtype=np.int64)),
        }),
        "config": ConfigRecord({"lr": 0.05, "epochs": 3, "name": "fedgc ✓", "flags": [True, False],
                                "blob": b"\\x00\\x01", "big": 2**64 - 1}),
    })


@app.main()
def main(grid: Grid, context: Context) -> None:
    out = Path(context.run_config["out-dir"])
    deadline = time.monotonic() + 60
    nodes = list(grid.get_node_ids())
    while not nodes and time.monotonic() < deadline:
        time.sleep(0.5)
        nodes = list(grid.get_node_ids())
    message = Message(sent_content(), dst_node_id=nodes[0], message_type="train", group_id="1")
    replies = list(grid.send_and_receive([message], timeout=60))
    result = {"nodes": [str(n) for n in nodes], "replies": len(replies)}
    for reply in replies:
        result["src_node_id"] = str(reply.metadata.src_node_id)
        result["message_type"] = reply.metadata.message_type
        result["group_id"] = reply.metadata.group_id
        result["reply_to_ok"] = reply.metadata.reply_to_message_id == message.metadata.message_id
        if reply.has_error():
            result["error"] = [reply.error.code, reply.error.reason]
            continue
        result["keys"] = list(reply.content.keys())
        result["array_keys"] = list(reply.content["arrays"].keys())
        np.savez(out / "arrays.npz", **{k: a.numpy() for k, a in reply.content["arrays"].items()})
        config = dict(reply.content["config"])
        config["blob"] = config["blob"].hex()
        result["config"] = config
        result["metrics"] = dict(reply.content["echo"])
        result["metrics"]["node-id"] = str(result["metrics"]["node-id"])
        if "node-config" in reply.content:
            result["node_config"] = dict(reply.content["node-config"])
    (out / "result.json").write_text(json.dumps(result))
'''

APP_PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "jvmecho"
version = "0.1.0"
description = "one message to the JVM SuperNode"
license = "Apache-2.0"
dependencies = []

[tool.flwr.app]
publisher = "fedgc"

[tool.flwr.app.components]
serverapp = "jvmecho_app:app"
clientapp = "jvmecho_app:clientapp"

[tool.flwr.app.config]
out-dir = ""
'''


def load_server_app_module(app_dir: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("jvmecho_app", app_dir / "jvmecho_app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_app(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The echo Flower app, its run config and its output folder: (app dir, run config, out dir)."""
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "jvmecho_app.py").write_text(SERVER_APP)
    (app_dir / "pyproject.toml").write_text(APP_PYPROJECT)
    out = tmp_path / "out"
    out.mkdir()
    run_config = tmp_path / "run-config.toml"
    run_config.write_text(tomli_w.dumps({"out-dir": str(out)}))
    return app_dir, run_config, out


def submit_echo(tmp_path: Path, connection: str, env: dict, node: ManagedProcess) -> None:
    """``flwr run`` the echo app; returns when the run is over (then stops the JVM node with SIGTERM)."""
    app_dir, run_config, out = tmp_path / "app", tmp_path / "run-config.toml", tmp_path / "out"
    started = time.monotonic()
    result = flwr_run(app_dir, connection, run_config, env, tmp_path / "flwr-run.log", timeout_s=120)
    run_log = (tmp_path / "flwr-run.log").read_text(errors="replace")
    assert result.returncode == 0, run_log + node.log_tail(40)
    assert (out / "result.json").exists(), run_log + node.log_tail(40)
    assert time.monotonic() - started < 90
    node.stop()
    assert node.process.returncode == 0, node.log_tail(40)  # SIGTERM: a clean exit


def check_echo(tmp_path: Path, node_log: str, node_config: str | None = None) -> dict:
    """The reply the ServerApp saved is exactly EchoHandler's answer to what it sent (and, given the
    node's ``--node-config``, that config read as flower-supernode reads it)."""
    app_dir, out = tmp_path / "app", tmp_path / "out"
    got = json.loads((out / "result.json").read_text())
    assert got["replies"] == 1 and "error" not in got, got
    assert got["reply_to_ok"] and got["message_type"] == "train" and got["group_id"] == "1"
    assert got["keys"] == ["arrays", "config", "echo"] + (["node-config"] if node_config else [])
    assert got["array_keys"] == ["w", "big", "b", "steps"]
    if node_config:
        from flwr.common.config import parse_config_args

        assert got["node_config"] == parse_config_args([node_config])
    sent = load_server_app_module(app_dir).sent_content()
    arrays = np.load(out / "arrays.npz")
    total = 0.0
    for key in ("w", "big", "b"):
        x = sent["arrays"][key].numpy()
        assert arrays[key].dtype == x.dtype and arrays[key].shape == x.shape
        assert np.array_equal(arrays[key], x * x.dtype.type(2) + x.dtype.type(1)), key  # bit-exact
        for value in x.ravel().tolist():  # the Java handler's order and float64 accumulation
            total += value
    assert np.array_equal(arrays["steps"], np.array([7, 8], dtype=np.int64))  # non-float: unchanged
    assert got["config"] == {"lr": 0.05, "epochs": 3, "name": "fedgc ✓", "flags": [True, False], "blob": "0001",
                             "big": 2**64 - 1}
    metrics = got["metrics"]
    assert metrics["num-arrays"] == 4 and metrics["num-elements"] == 6 + 1_500_000 + 3
    assert metrics["sum"] == total
    assert metrics["node-id"] == got["src_node_id"] == got["nodes"][0]
    assert metrics["type-and-group-lengths"] == [len("train"), len("1")]
    # The node took the message apart and put the reply together as objects, and left on SIGTERM.
    assert "Received successfully" in node_log and "Sent successfully" in node_log, node_log
    assert f"SuperNode {got['src_node_id']} deactivated" in node_log, node_log
    return got


NODE_CONFIG = 'partition-id=0 num-partitions=2 name="pixel 7" ratio=0.5 fast=true'


def test_jvm_supernode_answers_a_flower_serverapp(jar, tmp_path):
    write_app(tmp_path)
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    write_connection(home, "jvm-local", f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes: list[ManagedProcess] = []
    try:
        # The node starts first: it must retry (with back-off) until the SuperLink is up.
        node = ManagedProcess(["java", "-jar", str(jar), "--superlink", f"127.0.0.1:{port}", "--insecure",
                               "--node-config", NODE_CONFIG, "--handler", "fedgc.supernode.EchoHandler"],
                              logs / "jvm-supernode.log", env)
        processes.append(node)
        deadline = time.monotonic() + 30
        while "Connection attempt failed" not in node.log_tail(5):
            assert node.running() and time.monotonic() < deadline, node.log_tail()
            time.sleep(0.2)
        processes.insert(0, start_superlink(port, logs, env, simulation=False))
        submit_echo(tmp_path, "jvm-local", env, node)
    finally:
        for process in reversed(processes):
            process.stop()
    node_log = (logs / "jvm-supernode.log").read_text(errors="replace")
    got = check_echo(tmp_path, node_log, NODE_CONFIG)
    assert got["node_config"]["partition-id"] == 0 and got["node_config"]["name"] == "pixel 7"
    assert f"SuperNode {got['src_node_id']} unregistered" in node_log, node_log  # it registered itself
    assert "Connection successful after" in node_log, node_log


def sh(command: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(not (shutil.which("openssl") and shutil.which("ssh-keygen")), reason="needs openssl and ssh-keygen")
def test_jvm_supernode_over_tls_with_a_registered_key(jar, tmp_path):
    """docs/deploy-edge.md's secure deployment with the JVM node: TLS verified against the CA
    certificate, SuperNode authentication with an ssh-keygen ECDSA key registered by ``flwr supernode
    register``; an unregistered key is refused with one line."""
    for command in (
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=fedgc-ca",
         "-keyout", "ca.key", "-out", "ca.crt"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=superlink", "-keyout", "server.key",
         "-out", "server.csr"],
        ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-days", "2", "-extfile", "san.ext", "-out", "server.pem"],
    ):
        (tmp_path / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1")
        assert sh(command, tmp_path).returncode == 0, command
    for key in ("node-key", "stranger-key"):
        assert sh(["ssh-keygen", "-t", "ecdsa", "-b", "384", "-N", "", "-f", key, "-q"], tmp_path).returncode == 0
    write_app(tmp_path)
    home = tmp_path / "flwr-home"
    home.mkdir()
    env = flower_env(home)
    port = free_port()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "edge"\n\n[superlink.edge]\naddress = "127.0.0.1:{port}"\n'
        f'root-certificates = "{tmp_path / "ca.crt"}"\n')
    logs = tmp_path / "logs"
    logs.mkdir()
    processes: list[ManagedProcess] = []
    try:
        processes.append(ManagedProcess(
            [script("flower-superlink"), "--ssl-ca-certfile", "ca.crt", "--ssl-certfile", "server.pem",
             "--ssl-keyfile", "server.key", "--enable-supernode-auth", "--host", "127.0.0.1", "--port", str(port),
             "--disable-runtime-dependency-installation"], logs / "superlink.log", env, cwd=tmp_path))
        deadline = time.monotonic() + 90
        while "registered successfully" not in (out := sh([script("flwr"), "supernode", "register", "node-key.pub",
                                                           "edge"], tmp_path, env)).stdout:
            assert time.monotonic() < deadline, out.stdout + out.stderr
            time.sleep(1)
        registered_id = out.stdout.split("SuperNode ")[1].split()[0]

        stranger = subprocess.run(["java", "-jar", str(jar), "--superlink", f"127.0.0.1:{port}", "--root-certificates",
                                   "ca.crt", "--auth-supernode-private-key", "stranger-key", "--max-wait-time", "5"],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
        assert stranger.returncode == 1, stranger.stderr
        assert "Failed to initialize the connection to the SuperLink: activate-node: HTTP 4" in stranger.stderr

        node = ManagedProcess(["java", "-jar", str(jar), "--superlink", f"127.0.0.1:{port}", "--root-certificates",
                               "ca.crt", "--auth-supernode-private-key", "node-key",
                               "--handler", "fedgc.supernode.EchoHandler"], logs / "jvm-supernode.log", env,
                              cwd=tmp_path)
        processes.append(node)
        submit_echo(tmp_path, "edge", env, node)
    finally:
        for process in reversed(processes):
            process.stop()
    node_log = (logs / "jvm-supernode.log").read_text(errors="replace")
    got = check_echo(tmp_path, node_log)
    assert got["src_node_id"] == registered_id
    assert "unregistered" not in node_log  # a registered key stays registered
