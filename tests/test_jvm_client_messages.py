"""The hostile train messages of ``tests/vectors/client_messages.json`` through the JVM client.

The same vectors as fedgc's Python ClientApp's suite (``tests/test_client_message_hostile.py``: the
base message is that suite's — ``mlp`` on digits, DGC, partition 0 of 4 — and each vector changes
one key of ``client-config`` or ``config``) go through ``FedgcHandler.handle`` in one JVM
(``fedgc.client.MessageVectorCheck``, a fresh handler and no stored state per vector, the heap
capped at 200 MB): each must end in an error reply whose reason starts with the vector's code from
docs/client-protocol.md ("What a client refuses"), or in a correct reply (``update`` and
``metrics``), each within 5 s — never an exception, a hang or an allocation failure.

A vector whose outcome legitimately differs in the JVM would be listed in ``JVM_EXCEPTIONS`` with
the reason; none does today (the suite's model, ``mlp``, has a Java trainer).
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess

import numpy as np
import pytest

from .conftest import REPO
from .test_jvm_client import JAR, TESTS_JAR, jar  # noqa: F401  (the fixture: make jvm, or skip)

pytestmark = pytest.mark.jvm

VECTORS = REPO / "tests" / "vectors" / "client_messages.json"
# name -> (the JVM's outcome, why it differs from the vector's). Empty: every vector holds as written.
JVM_EXCEPTIONS: dict[str, tuple[str | None, str]] = {}
HEAP = "-Xmx200m"


def float_bits(value: float) -> dict:
    return {"float_bits": struct.unpack("<q", struct.pack("<d", value))[0]}


def for_java(value):
    """A value for the client's JSON reader (integers only): floats as their bit patterns; the
    vectors' other encodings (delete, string_runs, list_runs) are decoded by the Java side."""
    if isinstance(value, float):
        return float_bits(value)
    if isinstance(value, list):
        return [for_java(v) for v in value]
    if isinstance(value, dict) and "float" in value:
        return float_bits(float(value["float"]))
    if isinstance(value, dict) and "list_runs" in value:
        return {"list_runs": [[for_java(item), n] for item, n in value["list_runs"]]}
    if isinstance(value, dict):
        return {k: for_java(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The Python suite's base message and node data, as MessageVectorCheck reads them."""
    from tests.test_client_message_hostile import DATA, WEIGHTS, base_content

    content = base_content()
    folder = tmp_path_factory.mktemp("jvm-messages")
    partition = DATA.partitions[0]
    np.savez(folder / "train.npz", x=np.asarray(partition.x, dtype=np.float32), y=np.asarray(partition.y))
    arrays = {name: {"shape": list(t.shape), "values": t.numpy().astype(np.float32).view(np.uint32).ravel().tolist()}
              for name, t in WEIGHTS.items()}
    message = {"client-config": for_java(dict(content.config_records["client-config"])),
               "config": for_java(dict(content.config_records["config"])), "arrays": arrays}
    return folder, message, len(partition)


def run_check(folder, message: dict, vectors: list[dict], node_config: dict) -> dict[str, dict]:
    cases = folder / "cases.json"
    cases.write_text(json.dumps({**message, "node-config": for_java(node_config), "vectors": for_java(vectors)}))
    result = subprocess.run(["java", HEAP, "-cp", f"{JAR}{os.pathsep}{TESTS_JAR}", "fedgc.client.MessageVectorCheck",
                             str(cases), str(folder)], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {line["name"]: line for line in lines}


NODE = {"partition-id": 0, "num-partitions": 4}


def test_every_vector_is_refused_with_its_reason_or_answered_within_5_s(base, jar):  # noqa: F811
    folder, message, examples = base
    vectors = json.loads(VECTORS.read_text())
    assert len(vectors) >= 100
    outcomes = run_check(folder, message, vectors, NODE)
    assert sorted(outcomes) == sorted(v["name"] for v in vectors)
    wrong = []
    for vector in vectors:
        name, got = vector["name"], outcomes[vector["name"]]
        expected = JVM_EXCEPTIONS[name][0] if name in JVM_EXCEPTIONS else vector["refuse"]
        want = "reply" if expected is None else f"refuse:{expected}"
        if got["outcome"] != want:
            wrong.append(f"{name}: expected {want}, got {got['outcome']} ({got['detail'][:200]})")
        if got["ms"] >= 5000:
            wrong.append(f"{name}: {got['ms']} ms")
        if got["outcome"] == "reply":
            assert got["detail"] == f"num-examples {examples}", got
        else:
            assert "\n" not in got["detail"], got
    assert not wrong, "\n".join(wrong)
    assert sum(o["outcome"] == "reply" for o in outcomes.values()) >= 10  # the valid variants still train


def test_node_limits_come_from_the_node_config(base, jar):  # noqa: F811
    """``--node-config "max-local-steps=10"`` refuses 50 steps, ``max-batch-size=4`` a batch of 8,
    ``max-parameters=1000`` the suite's mlp (``too-large``); a limit that is not a positive number is
    ``bad-node-config``; the defaults (100,000 steps, 65,536 a batch) are Python's."""
    folder, message, _ = base
    steps_50 = [{"name": "local-steps 50", "record": "client-config", "key": "local-steps", "value": 50}]
    assert run_check(folder, message, steps_50, {**NODE, "max-local-steps": 10})["local-steps 50"]["outcome"] == \
        "refuse:bad-client-config"
    assert run_check(folder, message, steps_50, NODE)["local-steps 50"]["outcome"] == "reply"
    batch = [{"name": "batch 100k", "record": "client-config", "key": "batch-size", "value": 100_000},
             {"name": "steps 100k", "record": "client-config", "key": "local-steps", "value": 100_001}]
    got = run_check(folder, message, batch, NODE)
    assert got["batch 100k"]["outcome"] == got["steps 100k"]["outcome"] == "refuse:bad-client-config"
    batch_8 = [{"name": "batch 8", "record": "client-config", "key": "batch-size", "value": 8}]
    assert run_check(folder, message, batch_8, {**NODE, "max-batch-size": 4})["batch 8"]["outcome"] == \
        "refuse:bad-client-config"
    for bad in ("ten", 0, -5, math.nan, math.inf, True):
        got = run_check(folder, message, steps_50, {**NODE, "max-local-steps": bad})["local-steps 50"]
        assert got["outcome"] == "refuse:bad-node-config", (bad, got)
    params = run_check(folder, message, steps_50, {**NODE, "max-parameters": 1000})["local-steps 50"]
    assert params["outcome"] == "refuse:too-large", params
