"""The JVM client (clients/jvm, ``fedgc.client.FedgcHandler``) in a real fedgc run: a
``flower-superlink`` on 127.0.0.1, two Python ``flower-supernode``s (partitions 0 and 1, simulated
data) and one JVM SuperNode holding partition 2 from its own ``train.npz`` (written by ``fedgc
export-data``), the repository submitted with ``flwr run``. DGC uploads, top-k compressed downloads.

- Insecure, ``scenarios/jvm_phones.yaml`` (3 of its rounds), the client built on protoc's ``lite`` output
  (``fedgc-client-lite.jar``, what Android's protobuf-javalite runs): three rounds; every update of the JVM
  node is applied (none rejected, none failed), its node is in every round's ``applied_nodes``, its
  downloads after the first (a reset: it announces ``no-replica``) are compressed differences it rebuilds
  and digest-checks, and accuracy rises; the checkpoint after round 2 holds its state (``query.state``),
  its replica equal to the server's.
- TLS + SuperNode authentication, with a crash: every node's key registered with ``flwr supernode
  register``; a JVM node with an unregistered key is refused. The JVM node is SIGKILLed in round 2
  after it trained, compressed and saved its state but before its reply left (``LedgerHandler``,
  test code, holds the reply there); the round's deadline passes, the server counts it and goes on;
  the node is restarted (same key: same node id), rejoins, restores round 2's unapplied update into its
  memory, and over the whole run nothing it produced is lost:
  Σ Δ produced = Σ sent in the rounds the server applied + its residual (memory + unapplied pending).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tomli_w
import yaml

from fedgc.flower.runtime.runtime_processes import (
    ManagedProcess,
    flower_env,
    flwr_run,
    free_port,
    script,
    start_superlink,
    start_supernode,
    write_connection,
)

from .conftest import REPO
from .test_jvm_client import JAR, TESTS_JAR, jar  # noqa: F401  (the fixture: make jvm, or skip)

LITE_JAR = JAR.parent / "fedgc-client-lite.jar"  # the client on protoc's lite output (Android's protobuf-javalite)
JVM_PARTITION = 2
JVM_LABEL = JVM_PARTITION + 1  # the server presents partition p as node p + 1 (PartitionGrid)
BASE = {
    "seed": 3,
    "data": {"dataset": "digits", "num_clients": 3, "partition": "iid"},
    "model": {"name": "mlp"},
    "client": {"local_steps": 5, "batch_size": 16, "lr": 0.1},
    "downlink": {"name": "topk", "density": 0.1},
    "strategy": {"fraction": 1.0},
    "eval": {"target_accuracy": 0.5},
}


def export_partition(scenario: dict, tmp_path: Path) -> Path:
    """``fedgc export-data`` of the JVM node's partition: DIR/train.npz, as a device would hold it."""
    from fedgc.cli.export_data import main as export_data

    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert export_data([str(path), "--out", str(tmp_path / "device"), "--partition", str(JVM_PARTITION)]) == 0
    data_dir = tmp_path / "device" / f"partition-{JVM_PARTITION}"
    assert (data_dir / "train.npz").is_file()
    return data_dir


def run_config(scenario: dict, tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out"
    path = tmp_path / "run-config.toml"
    path.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(scenario), "out-dir": str(out), "quiet": True,
                                   "node-wait-s": 90.0}))
    return path, out


def results(out: Path, log: Path) -> tuple[dict, list[dict]]:
    assert (out / "summary.json").exists(), log.read_text(errors="replace")[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    return summary, [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def jvm_node(port: int, data_dir: Path, log: Path, env: dict, *extra: str, handler: str | None = None,
             cwd: Path | None = None, jar_path: Path = JAR) -> ManagedProcess:
    classpath = f"{jar_path}{os.pathsep}{TESTS_JAR}" if handler else str(jar_path)
    command = ["java", "-cp", classpath, "fedgc.client.Main", "--superlink", f"127.0.0.1:{port}",
               "--node-config", f"partition-id={JVM_PARTITION} num-partitions=3", "--data-dir", str(data_dir),
               "--poll-interval", "0.2", *extra]
    if handler:
        command += ["--handler", handler]
    return ManagedProcess(command, log, env, cwd=cwd)


def handler_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["java", "-cp", f"{JAR}{os.pathsep}{TESTS_JAR}", "fedgc.client.HandlerCheck", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def as_bits(weights: dict) -> dict:
    return {name: {"shape": w["shape"], "values": np.asarray(w["values"], dtype=np.float32).view(np.uint32).tolist()}
            for name, w in weights.items()}


def test_java_downloads_and_digests_equal_the_vectors(tmp_path, jar):  # noqa: F811
    """tests/vectors/downlink: Java's digests and rebuilt replica are Python's bit for bit; a wrong
    base, a wrong result digest and a missing replica are refused and leave the replica as it was."""
    vectors = REPO / "tests" / "vectors" / "downlink"
    digest, reset, delta = (json.loads((vectors / f"{n}.json").read_text()) for n in ("digest", "reset", "delta"))
    assert len(digest["cases"]) >= 3
    bits = {"digest": [{"weights": as_bits(c["weights"]), "digest": c["digest"]} for c in digest["cases"]],
            "reset": {"arrays": as_bits(reset["arrays"]), "digest": reset["digest"]},
            "delta": {**{k: delta[k] for k in ("downlink-base", "downlink-digest", "model-delta")},
                      "replica": as_bits(delta["replica"]), "new_replica": as_bits(delta["new_replica"])}}
    (tmp_path / "downlink.json").write_text(json.dumps(bits))
    result = handler_check("downlink", str(tmp_path / "downlink.json"))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


def test_java_applies_v3_downloads_bit_for_bit(tmp_path, jar):  # noqa: F811
    """Compressed downloads made by fedgc's server code (``make_download``, the blob in the version
    ``encode_update`` writes) with ``downlink.value_dtype`` int8, int4 and sign (blob version 3) and
    fp16 (version 1): Java rebuilds Python's new replica bit for bit and its digest."""
    import torch

    from fedgc.compress.downlink import DownlinkConfig, make_download, model_digest
    from fedgc.flower.update_record import wire_version
    from fedgc.wire.codec import encode_bytes

    cases = []
    for i, value_dtype in enumerate(("int8", "int4", "sign", "fp16")):
        g = torch.Generator().manual_seed(20 + i)
        replica = {"fc.weight": torch.randn(6, 9, generator=g), "fc.bias": torch.randn(6, generator=g),
                   "head.weight": torch.randn(3, 6, generator=g)}
        target = {k: v + torch.randn(v.shape, generator=g).mul(0.25) for k, v in replica.items()}
        config = DownlinkConfig(name="topk", density=0.25, value_dtype=value_dtype)
        download = make_download(target, replica, config, config.compressor())
        version = wire_version(download.payloads)
        assert version == (1 if value_dtype == "fp16" else 3)
        cases.append({"name": value_dtype, "replica": as_bits({k: {"shape": list(v.shape), "values": v.flatten().tolist()}
                                                                 for k, v in replica.items()}),
                      "downlink-base": model_digest(replica), "downlink-digest": model_digest(download.replica),
                      "model-delta": encode_bytes(download.payloads, version=version).hex(),
                      "new_replica": as_bits({k: {"shape": list(v.shape), "values": v.flatten().tolist()}
                                              for k, v in download.replica.items()})})
    (tmp_path / "downloads.json").write_text(json.dumps({"cases": cases}))
    result = handler_check("downloads", str(tmp_path / "downloads.json"))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


def test_handler_speaks_wire_v3_unless_told_version_1_only(tmp_path, jar):  # noqa: F811
    """The census answer declares ``wire-versions`` [1, 3] (none with ``--node-config "wire-versions=1"``,
    any other value refused); an int8 round's update is a version-3 blob in the compact form (a
    ConfigRecord ``{blob: bytes}``) fedgc's server decodes (the weight's values int8-coded, the bias
    fp16); a version-1-only node refuses int8 values and a v3 download (in either form) in one line,
    and trains an fp32 round, its update a version-1 blob in the ArrayRecord."""
    import torch

    from fedgc.compress.payloads import CodedSparsePayload, DensePayload
    from fedgc.wire.codec import decode_bytes

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "train.npz", x=rng.normal(size=(4, 3)).astype(np.float32), y=np.array([0, 1, 1, 0]))
    result = handler_check("wire", str(tmp_path), str(tmp_path / "int8-update.bin"))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr
    blob = (tmp_path / "int8-update.bin").read_bytes()
    assert blob[0] == 3
    payloads = decode_bytes(blob, {"net.1.weight": (2, 3), "net.1.bias": (2,)})
    weight, bias = payloads["net.1.weight"], payloads["net.1.bias"]
    assert isinstance(weight, CodedSparsePayload) and weight.encoding == "int8" and weight.block == 0
    assert isinstance(bias, DensePayload) and bias.values.dtype == torch.float16


def flower_objects(folder: Path) -> tuple[str, dict[str, bytes]]:
    """A message the JVM deflated (FOLDER/root, FOLDER/objects/ID): its root id and objects, each id
    checked as Flower checks it (the SHA-256 of the object's bytes)."""
    import hashlib

    contents = {p.name: p.read_bytes() for p in (folder / "objects").iterdir()}
    assert all(hashlib.sha256(c).hexdigest() == i for i, c in contents.items())
    return (folder / "root").read_text(), contents


def test_a_v3_reply_is_the_compact_record_pythons_client_app_writes(tmp_path, jar):  # noqa: F811
    """Each reply the JVM handler pushes (deflated by the SDK), inflated by flwr: an int8, int4 or sign
    round's ``update`` is the compact form (a ConfigRecord holding the version-3 blob as its one bytes
    value ``blob``), an fp32 round's a version-1 blob in the ArrayRecord, also on a version-1-only node
    (``wire-versions=1``, which never writes the compact form). flwr deflates the inflated reply into the
    very objects the JVM sent, fedgc's server decodes the update, and the record dict fedgc's Python
    ClientApp writes for the same blob and metrics (``encode_update`` of the decoded payloads) has the
    same object id: the same bytes on the wire. The compact form spares 400 bytes or more."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

    from fedgc.flower.update_record import BLOB_KEY, UPDATE_KEY, decode_update, encode_update, update_record

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "train.npz", x=rng.normal(size=(4, 3)).astype(np.float32), y=np.array([0, 1, 1, 0]))
    result = handler_check("replies", str(tmp_path), str(tmp_path / "replies"))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr
    shapes = {"net.1.weight": (2, 3), "net.1.bias": (2,)}
    for name, version in (("int8", 3), ("int4", 3), ("sign", 3), ("fp32", 1), ("fp32-v1-only", 1)):
        root, objects = flower_objects(tmp_path / "replies" / name)
        reply = inflate_object_from_contents(root, dict(objects))
        assert {i: o.deflate() for i, o in get_all_nested_objects(reply).items()} == objects, name
        record = update_record(reply.content, "update")
        assert list(reply.content) == ["update", "metrics"], name
        if version == 3:
            assert isinstance(record, ConfigRecord) and list(record) == [BLOB_KEY], (name, record)
            blob = record[BLOB_KEY]
            assert type(blob) is bytes and blob[0] == 3, name
        else:
            assert isinstance(record, ArrayRecord) and list(record) == [UPDATE_KEY], (name, record)
            blob = record[UPDATE_KEY].numpy().tobytes()
            assert blob[0] == 1, name
        payloads = decode_update(record, shapes)  # what fedgc's server reads
        pythons = RecordDict({"update": encode_update(payloads),
                              "metrics": MetricRecord(dict(reply.content.metric_records["metrics"]))})
        assert pythons.object_id == reply.content.object_id, name
        if version == 3:
            framed = RecordDict({"update": ArrayRecord({UPDATE_KEY: Array(np.frombuffer(blob, dtype=np.uint8))}),
                                 "metrics": pythons["metrics"]})
            compact, arrays = (sum(len(o.deflate()) for o in get_all_nested_objects(d).values()) for d in (pythons, framed))
            assert arrays - compact >= 400, (name, compact, arrays)


def test_compact_downloads_from_pythons_server_are_read_and_malformed_ones_refused(tmp_path, jar):  # noqa: F811
    """Compressed downloads as fedgc's server sends them (``make_download``, ``encode_update``: int8,
    int4 and sign in the compact form, fp16 in the ArrayRecord; and a version-1 blob in the compact
    form, which a receiver reads too), deflated by flwr and inflated by the JVM SDK: applied bit for bit.
    A compact ``model-delta`` with another key, a second item, a string, a list or a number for its
    value, or a blob above 1 MiB is refused as a malformed download with fedgc's reason for it
    (``bad-record``), the replica left as it was."""
    import torch
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.app.metadata import Metadata
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    from fedgc.compress.downlink import DownlinkConfig, make_download, model_digest
    from fedgc.flower.update_record import MAX_COMPACT_BYTES, CodecError, decode_update, encode_update
    from fedgc.wire.codec import encode_bytes

    def bits(weights: dict) -> dict:
        return as_bits({k: {"shape": list(v.shape), "values": v.flatten().tolist()} for k, v in weights.items()})

    objects = tmp_path / "objects"
    objects.mkdir()
    cases = []

    def add(name: str, record, replica: dict, download, **expect) -> None:
        config = ConfigRecord({"downlink-base": model_digest(replica), "downlink-digest": model_digest(download.replica)})
        message = Message(metadata=Metadata(run_id=1, message_id="", src_node_id=1, dst_node_id=2, reply_to_message_id="",
                                            group_id="1", created_at=1767225600.0, ttl=3600.0, message_type="train"),
                          content=RecordDict({"model-delta": record, "config": config}))
        for object_id, obj in get_all_nested_objects(message).items():
            (objects / object_id).write_bytes(obj.deflate())
        cases.append({"name": name, "root": message.object_id, "replica": bits(replica), **expect})

    g = torch.Generator().manual_seed(5)
    replica = {"fc.weight": torch.randn(6, 9, generator=g), "fc.bias": torch.randn(6, generator=g)}
    target = {k: v + torch.randn(v.shape, generator=g).mul(0.25) for k, v in replica.items()}
    shapes = {k: tuple(v.shape) for k, v in replica.items()}
    for value_dtype in ("int8", "int4", "sign", "fp16"):
        config = DownlinkConfig(name="topk", density=0.25, value_dtype=value_dtype)
        download = make_download(target, replica, config, config.compressor())
        record = encode_update(download.payloads)
        assert isinstance(record, ConfigRecord) == (value_dtype != "fp16")
        add(value_dtype, record, replica, download, new_replica=bits(download.replica))
    v1 = ConfigRecord({"blob": encode_bytes(download.payloads, version=1)})  # fp16's: a version-1 blob, compact
    add("v1-compact", v1, replica, download, new_replica=bits(download.replica))
    blob = v1["blob"]
    malformed = {"another-key": ConfigRecord({"update": blob}), "second-item": ConfigRecord({"blob": blob, "x": b""}),
                 "string": ConfigRecord({"blob": blob.hex()}), "list": ConfigRecord({"blob": [blob]}),
                 "number": ConfigRecord({"blob": 3}), "above-1-MiB": ConfigRecord({"blob": b"\x03" + bytes(MAX_COMPACT_BYTES)})}
    for name, record in malformed.items():
        with pytest.raises(CodecError) as err:
            decode_update(record, shapes)
        assert err.value.reason == "bad-record", name
        add(name, record, replica, download, refuse="a malformed download: bad-record: ")
    (tmp_path / "manifest.json").write_text(json.dumps({"cases": cases}))
    result = handler_check("inflated", str(tmp_path))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


def test_handler_refuses_what_it_cannot_honour_with_one_line(tmp_path, jar):  # noqa: F811
    """No client-config, another version, a compressor or option the JVM lacks, a model without a Java
    trainer, data that does not fit the model, an evaluate message, a node without data: one-line
    error replies; a good message gets update + metrics in ReplyMetrics' key order."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "train.npz", x=rng.normal(size=(4, 3)).astype(np.float32), y=np.array([0, 1, 1, 0]))
    result = handler_check("refuse", str(tmp_path))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr
    with np.load(tmp_path / "fedgc-state.npz") as state:  # the good message's state, readable by numpy
        assert sorted(state.files) == ["memory/dgc_momentum/net.1.bias", "memory/dgc_momentum/net.1.weight",
                                       "memory/dgc_velocity/net.1.bias",
                                       "memory/dgc_velocity/net.1.weight", "pending/1/net.1.bias",
                                       "pending/1/net.1.weight", "run/1"]


def test_poll_and_heartbeat_intervals_are_checked(jar):  # noqa: F811
    for args, error in ((["--poll-interval", "x"], "--poll-interval must be a number of seconds, got 'x'"),
                        (["--poll-interval", "0"], "--poll-interval must be between"),
                        (["--heartbeat-interval", "5"], "--heartbeat-interval must be between 10.0 and 1800.0")):
        bad = subprocess.run(["java", "-jar", str(JAR), "--superlink", "127.0.0.1:9", "--insecure", *args],
                             capture_output=True, text=True, timeout=60, check=False)
        assert bad.returncode == 2 and bad.stderr.splitlines()[0].startswith(f"error: {error}"), bad.stderr


def test_jvm_node_trains_in_a_dgc_run_with_compressed_downloads(tmp_path, flower_app, jar):  # noqa: F811
    # The shipped scenario for phones (scenarios/jvm_phones.yaml), 3 of its rounds, a checkpoint after round 2.
    shipped = yaml.safe_load((REPO / "scenarios" / "jvm_phones.yaml").read_text())
    assert shipped["model"]["name"] == "mlp" and shipped["compression"]["name"] == "dgc"
    assert shipped["downlink"]["name"] == "topk" and shipped["data"]["num_clients"] == 3
    scenario = {**shipped, "rounds": 3, "checkpoint_every": 2}
    data_dir = export_partition(scenario, tmp_path)
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    write_connection(home, "jvm-e2e", f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes: list[ManagedProcess] = []
    try:
        processes.append(start_superlink(port, logs, env, simulation=False))
        processes += [start_supernode(port, p, 3, logs, env) for p in (0, 1)]
        assert LITE_JAR.is_file()
        node = jvm_node(port, data_dir, logs / "jvm.log", env, "--insecure", jar_path=LITE_JAR)
        processes.append(node)
        config, out = run_config(scenario, tmp_path)
        log = tmp_path / "flwr-run.log"
        result = flwr_run(flower_app, "jvm-e2e", config, env, log, timeout_s=240)
        assert result.returncode == 0, log.read_text(errors="replace")[-4000:]
        assert node.running(), node.log_tail()
    finally:
        for process in reversed(processes):
            process.stop()
    summary, rows = results(out, log)
    jvm_log = (logs / "jvm.log").read_text(errors="replace")
    assert [r["round"] for r in rows] == [1, 2, 3], jvm_log
    assert summary["updates_rejected"] == 0 and summary["clients_failed"] == 0, (summary, jvm_log)
    for row in rows:
        assert JVM_LABEL in row["applied_nodes"], (row, jvm_log)
        assert row["rejected"] == row["failed"] == 0 and row["applied"] == 3
        assert 0 < row["achieved_density"] < 0.2  # DGC at 5 %, dense biases
    # The JVM node announced no replica: its first download is the whole model (a reset), the rest are
    # compressed differences it applied and digest-checked (a mismatch would have failed the round).
    assert rows[0]["downlink_resets"] == 1 and all(r["downlink_resets"] == 0 for r in rows[1:])
    assert all(0 < r["downlink_density"] < 0.3 for r in rows[1:])
    assert rows[-1]["accuracy"] > rows[0]["accuracy"] + 0.05, [r["accuracy"] for r in rows]
    for r in (1, 2, 3):
        assert f"fedgc: round {r}: 5 steps on " in jvm_log
    assert "not applied" not in jvm_log  # every update was applied: nothing to restore
    # The state survives on the device: its run, memory, nothing pending beyond round 3's update, the replica.
    with np.load(data_dir / "fedgc-state.npz") as state:
        names = set(state.files)
    assert {n.split("/")[0] for n in names} == {"run", "memory", "pending", "replica"}
    assert all(n.startswith("pending/3/") for n in names if n.startswith("pending/"))
    # The checkpoint after round 2 asked every node for its state (query.state): the JVM node's holds
    # its memory, round 2's pending update and a replica equal to the server's record of it.
    from fedgc.compress.downlink import model_digest
    from fedgc.core import checkpoint

    saved, _ = checkpoint.load(out)
    assert saved["run"]["round"] == 2
    jvm_state = saved["transport"]["contexts"][JVM_LABEL]["arrays"]
    assert set(jvm_state) == {"jvm.memory", "jvm.pending", "jvm.replica"}
    assert {k.split("/")[0] for k in jvm_state["jvm.pending"]} == {"2"}
    assert any(k.startswith("dgc_velocity/") for k in jvm_state["jvm.memory"])
    server_replica, server_digest = saved["downlink"]["replicas"][JVM_LABEL]
    assert model_digest(jvm_state["jvm.replica"]) == server_digest == model_digest(server_replica)


# ----------------------------------------------------------------------------- TLS, auth, a crash


def sh(command: list[str], cwd: Path, env=None, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def make_certificates(d: Path) -> None:
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1")
    for command in (
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=fedgc-ca",
         "-keyout", "ca.key", "-out", "ca.crt"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=superlink", "-keyout", "server.key",
         "-out", "server.csr"],
        ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-days", "2", "-extfile", "san.ext", "-out", "server.pem"],
    ):
        assert sh(command, d).returncode == 0, command


def register(key: str, d: Path, env: dict, timeout_s: float = 90) -> str:
    """``flwr supernode register KEY.pub edge`` (retried while the SuperLink starts); the node id."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = sh([script("flwr"), "supernode", "register", f"{key}.pub", "edge"], d, env)
        if "registered successfully" in out.stdout + out.stderr:
            return out.stdout.split("SuperNode ")[1].split()[0]
        assert time.monotonic() < deadline, out.stdout + out.stderr
        time.sleep(1)


def wait_for(path: Path, text: str, timeout_s: float, process: ManagedProcess | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in (path.read_text(errors="replace") if path.exists() else ""):
        assert process is None or process.running(), process.log_tail()
        assert time.monotonic() < deadline, f"{path.name} never printed {text!r}"
        time.sleep(0.1)


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as npz:
        return {k: npz[k].astype(np.float64) for k in npz.files}


@pytest.mark.skipif(not (shutil.which("openssl") and shutil.which("ssh-keygen")), reason="needs openssl and ssh-keygen")
def test_jvm_node_over_tls_survives_a_kill_and_loses_nothing(tmp_path, flower_app, jar):  # noqa: F811
    held_round = 2
    scenario = {**BASE, "name": "jvm-e2e-fault", "rounds": 4,
                # DGC without momentum correction: its memory accumulates Δ itself, so the law is exact.
                "compression": {"name": "dgc", "density": 0.05, "momentum_correction": False, "warmup_rounds": 0},
                # What ends round 2 is the SuperLink: 2 heartbeat intervals (10 s here) after the kill it marks
                # the node offline and answers for it with an error reply (counted failed). The deadline, in
                # real seconds on a deployment, is only a backstop, long enough for loaded Python nodes.
                "network": {"deadline_s": 120.0}}
    data_dir = export_partition(scenario, tmp_path)
    make_certificates(tmp_path)
    for key in ("node-0", "node-1", "jvm-key", "stranger-key"):
        assert sh(["ssh-keygen", "-t", "ecdsa", "-b", "384", "-N", "", "-f", key, "-q"], tmp_path).returncode == 0
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    home.mkdir()
    (home / "config.toml").write_text(f'[superlink]\ndefault = "edge"\n\n[superlink.edge]\naddress = "127.0.0.1:{port}"\n'
                                      f'root-certificates = "{tmp_path / "ca.crt"}"\n')
    logs = tmp_path / "logs"
    logs.mkdir()
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    jvm_env = {**env, "FEDGC_LEDGER_DIR": str(ledger)}
    tls = ["--root-certificates", "ca.crt"]
    processes: list[ManagedProcess] = []
    run: dict = {}
    try:
        processes.append(ManagedProcess(
            [script("flower-superlink"), "--ssl-ca-certfile", "ca.crt", "--ssl-certfile", "server.pem",
             "--ssl-keyfile", "server.key", "--enable-supernode-auth", "--host", "127.0.0.1", "--port", str(port),
             "--disable-runtime-dependency-installation"], logs / "superlink.log", env, cwd=tmp_path))
        jvm_id = register("jvm-key", tmp_path, env)
        for p in (0, 1):
            register(f"node-{p}", tmp_path, env)
            processes.append(ManagedProcess(
                [script("flower-supernode"), "--superlink", f"127.0.0.1:{port}", *tls, "--auth-supernode-private-key",
                 f"node-{p}", "--node-config", f"partition-id={p} num-partitions=3", "--host", "127.0.0.1",
                 "--port", str(free_port())], logs / f"supernode-{p}.log", env, cwd=tmp_path))

        stranger = subprocess.run(["java", "-jar", str(JAR), "--superlink", f"127.0.0.1:{port}", *tls,
                                   "--auth-supernode-private-key", "stranger-key", "--data-dir", str(data_dir),
                                   "--max-wait-time", "5"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                                  check=False)
        assert stranger.returncode == 1, stranger.stderr
        assert "Failed to initialize the connection to the SuperLink: activate-node: HTTP 4" in stranger.stderr

        secure = [*tls, "--auth-supernode-private-key", "jvm-key", "--heartbeat-interval", "10"]
        first = jvm_node(port, data_dir, logs / "jvm-1.log", {**jvm_env, "FEDGC_HOLD_ROUND": str(held_round)},
                         *secure, handler="fedgc.cli.check.LedgerHandler", cwd=tmp_path)
        processes.append(first)
        config, out = run_config(scenario, tmp_path)
        log = tmp_path / "flwr-run.log"

        def submit() -> None:
            run["result"] = flwr_run(flower_app, "edge", config, env, log, timeout_s=300)

        runner = threading.Thread(target=submit)
        runner.start()
        # The crash: round 2 trained, compressed, state saved, the reply not yet sent.
        wait_for(logs / "jvm-1.log", f"ledger: holding the reply of round {held_round}", 200, first)
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait(timeout=10)
        # Restarted at once: it waits until the SuperLink has marked the dead session offline.
        second = jvm_node(port, data_dir, logs / "jvm-2.log", jvm_env, *secure, handler="fedgc.cli.check.LedgerHandler",
                          cwd=tmp_path)
        processes.append(second)
        runner.join(timeout=330)
        assert not runner.is_alive(), "flwr run did not finish"
        assert run["result"].returncode == 0, log.read_text(errors="replace")[-4000:]
        assert second.running(), second.log_tail()
    finally:
        for process in reversed(processes):
            process.stop()
    summary, rows = results(out, log)
    second_log = (logs / "jvm-2.log").read_text(errors="replace")
    assert [r["round"] for r in rows] == [1, 2, 3, 4]
    assert f"SuperNode ID: {jvm_id}" in (logs / "jvm-1.log").read_text() and f"SuperNode ID: {jvm_id}" in second_log
    # The server counted the killed node in round 2 (an error reply once it was offline, or no reply by
    # the deadline) and went on.
    crashed = rows[held_round - 1]
    assert JVM_LABEL not in crashed["applied_nodes"] and crashed["late"] + crashed["failed"] >= 1, crashed
    assert JVM_LABEL in rows[0]["applied_nodes"]
    # It rejoined: a later round applied its update, and it put round 2's unsent update back into memory.
    rejoined = [r["round"] for r in rows[held_round:] if JVM_LABEL in r["applied_nodes"]]
    assert rejoined, [r["applied_nodes"] for r in rows]
    assert f"the update of round {held_round} was not applied; restored into the memory" in second_log
    assert summary["updates_rejected"] == 0

    # Conservation, per tensor: everything produced = what the server applied + what the client still owes.
    produced = {int(p.stem.split("-")[1]): load_npz(p) for p in ledger.glob("round-*.npz")}
    assert held_round in produced and max(produced) > held_round
    applied_rounds = {r["round"] for r in rows if JVM_LABEL in r["applied_nodes"]}
    state = load_npz(data_dir / "fedgc-state.npz")
    names = [k.split("/", 1)[1] for k in produced[1] if k.startswith("memory/")]
    for name in names:
        total = sum(entry[f"memory/{name}"] for entry in produced.values())
        applied = sum((produced[r][f"pending/{name}"] for r in applied_rounds), np.zeros_like(total))
        residual = state.get(f"memory/dgc_velocity/{name}", np.zeros_like(total)).copy()
        for key, sent in state.items():
            if key.startswith("pending/") and key.endswith(f"/{name}") and int(key.split("/")[1]) not in applied_rounds:
                residual += sent
        scale = float(np.abs(total).max())
        np.testing.assert_allclose(total, applied + residual, rtol=0, atol=1e-5 * scale, err_msg=name)
        if name.endswith("weight"):  # not trivially true: the client still owes a real share of what it produced
            assert float(np.abs(residual).sum()) > 0.05 * float(np.abs(total).sum()), name
