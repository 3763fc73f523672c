"""The hostile train messages of ``tests/client_vectors/client_messages.json`` through the JVM client.

The same vectors as fedgc's Python ClientApp's suite (``tests/test_client_message_hostile.py``: the
base message is that suite's — ``mlp`` on digits, DGC, partition 0 of 4 — and each vector changes
one key of ``client-config`` or ``config``; the ``epochs`` ones also remove ``local-steps``) go
through ``FedgcHandler.handle`` in one JVM (``fedgc.client.MessageVectorCheck``, a fresh handler and no stored
state per vector, the heap capped at 200 MB): each must end in an error reply whose reason starts with the vector's code from
docs/client-protocol.md ("What a client refuses"), or in a correct reply (``update`` and
``metrics``), each within 5 s — never an exception, a hang or an allocation failure.

A vector whose outcome legitimately differs in the JVM would be listed in ``JVM_EXCEPTIONS`` with
the reason; none does today (the suite's model, ``mlp``, has a Java trainer).

Besides the file's vectors: the Python suite's ``arrays`` vectors (``ARRAYS``: missing, a tensor
missing or extra, out of order, float64/int8, a wrong shape, a header declaring 1 TiB or float64,
truncated, not a .npy, a 2 GiB header length, stype ``torch.Tensor``, NaN weights) with the same
expected outcomes; its ``MISMATCH`` vectors (a consistent message whose model the node's data does not
fit: ``data-mismatch``); and the restored state (``bad-state``) in the JVM's own state records
(``jvm.memory``, ``jvm.pending``, sent as ``query.restore`` before the train message), mirroring the
Python suite's ``STATE`` vectors — the Python client's sparse state format has no JVM counterpart.
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

VECTORS = REPO / "tests" / "client_vectors" / "client_messages.json"
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


def as_list(record) -> list | None:
    """An ArrayRecord as MessageVectorCheck takes it: [name, dtype, shape, stype, hex], data as is."""
    if record is None:
        return None
    return [[name, a.dtype, list(a.shape), a.stype, bytes(a.data).hex()] for name, a in record.items()]


def test_the_python_suites_arrays_vectors_end_alike_in_the_jvm(base, jar):  # noqa: F811
    from tests.test_client_message_hostile import ARRAYS

    folder, message, _ = base
    vectors = [{"name": name, "arrays": as_list(make()), "refuse": expected} for name, make, expected in ARRAYS]
    assert len(vectors) >= 14
    outcomes = run_check(folder, message, vectors, NODE)
    got = {v["name"]: outcomes[v["name"]]["outcome"] for v in vectors}
    assert got == {v["name"]: "reply" if v["refuse"] is None else f"refuse:{v['refuse']}" for v in vectors}, outcomes
    assert all(o["ms"] < 5000 for o in outcomes.values()), outcomes


def test_data_that_does_not_fit_a_consistent_message_is_refused_as_in_python(base, jar):  # noqa: F811
    """The Python suite's ``MISMATCH`` vectors: ``input-shape`` or ``num-classes`` changed and the arrays
    built for that model sent with it; the node's digits do not fit it (``data-mismatch``)."""
    from tests.test_client_message_hostile import MISMATCH, arrays_for

    folder, message, _ = base
    vectors = [{"name": name, "record": "client-config", "key": key, "value": value,
                "arrays": as_list(arrays_for(key, value)), "refuse": expected}
               for name, key, value, expected in MISMATCH]
    outcomes = run_check(folder, message, vectors, NODE)
    got = {v["name"]: outcomes[v["name"]]["outcome"] for v in vectors}
    assert got == {v["name"]: f"refuse:{v['refuse']}" for v in vectors}, outcomes
    assert all(o["ms"] < 5000 for o in outcomes.values()), outcomes


def state_vectors() -> list[dict]:
    from flwr.app import Array

    from tests.test_client_message_hostile import W0, W0_SHAPE, npy

    def record(**tensors) -> list:
        return [[name, "float32", list(t.shape), "numpy.ndarray", npy(t).hex()] for name, t in tensors.items()]

    nan, ones = np.full(W0_SHAPE, np.nan, np.float32), np.ones(W0_SHAPE, np.float32)
    tib = Array(dtype="float32", shape=W0_SHAPE, stype="numpy.ndarray", data=npy(ones, header_shape=(2**38,)))
    return [
        {"name": "memory nan", "state": {"jvm.memory": record(**{f"dgc_velocity/{W0}": nan})}, "refuse": "bad-state"},
        {"name": "memory wrong shape", "state": {"jvm.memory": record(**{f"dgc_velocity/{W0}": np.zeros(3, np.float32)})},
         "refuse": "bad-state"},
        {"name": "memory of no parameter", "state": {"jvm.memory": record(**{"dgc_velocity/nope": ones})},
         "refuse": "bad-state"},
        {"name": "memory of no slot", "state": {"jvm.memory": record(**{W0: ones})}, "refuse": "bad-state"},
        {"name": "memory float64", "state": {"jvm.memory": [[f"dgc_velocity/{W0}", "float64", list(W0_SHAPE),
                                                             "numpy.ndarray", npy(ones.astype(np.float64)).hex()]]},
         "refuse": "bad-state"},
        {"name": "state header declares 1 TiB", "state": {"jvm.memory": [[f"dgc_velocity/{W0}", tib.dtype,
                                                                         list(tib.shape), tib.stype, tib.data.hex()]]},
         "refuse": "bad-state"},
        {"name": "state of another client", "state": {"fedgc.memory": record(**{f"dgc_velocity/{W0}": ones})},
         "refuse": "bad-state"},
        {"name": "pending of no round", "state": {"jvm.pending": record(**{W0: ones})}, "refuse": "bad-state"},
        {"name": "pending nan", "state": {"jvm.pending": record(**{f"1/{W0}": nan})}, "refuse": "bad-state"},
        {"name": "pending wrong shape", "state": {"jvm.pending": record(**{f"1/{W0}": np.zeros(5, np.float32)})},
         "refuse": "bad-state"},
        {"name": "memory as saved", "state": {"jvm.memory": record(**{f"dgc_velocity/{W0}": ones})}, "refuse": None},
        {"name": "pending as saved", "state": {"jvm.pending": record(**{f"1/{W0}": ones})}, "refuse": None},
    ]


def test_a_restored_state_is_checked_against_the_model_before_it_is_used(base, jar):  # noqa: F811
    folder, message, _ = base
    vectors = state_vectors()
    outcomes = run_check(folder, message, vectors, NODE)
    got = {v["name"]: outcomes[v["name"]]["outcome"] for v in vectors}
    assert got == {v["name"]: "reply" if v["refuse"] is None else f"refuse:{v['refuse']}" for v in vectors}, outcomes
    assert all(o["ms"] < 5000 for o in outcomes.values()), outcomes


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
