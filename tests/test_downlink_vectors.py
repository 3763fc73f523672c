"""The download vectors (tests/vectors/downlink, docs/wire-format.md "Downloads"): the digest recipe
byte by byte, a compressed download applied to its replica, and a reset."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedgc.compress.downlink import apply_download, model_digest
from fedgc.wire.codec import decode_bytes, encode_bytes

DOWNLINK = Path(__file__).parent / "vectors" / "downlink"


def weights(described: dict) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v["values"], dtype=torch.float32).reshape(v["shape"]) for k, v in described.items()}


def spec_digest(w: dict[str, torch.Tensor]) -> str:
    """From the document alone: names in code-point order; UTF-8 of name + "(d0, d1, …)" ("(d0,)" for
    one dimension, "()" for a scalar); then the f32 little-endian values; SHA-256; first 16 hex digits."""
    h = hashlib.sha256()
    for name in sorted(w):
        shape = w[name].shape
        text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
        h.update((name + text).encode("utf-8"))
        h.update(np.asarray(w[name].numpy(), dtype="<f4").tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("case", json.loads((DOWNLINK / "digest.json").read_text())["cases"],
                         ids=lambda c: ",".join(c["weights"]))
def test_digest_recipe(case):
    w = weights(case["weights"])
    assert hashlib.sha256(bytes.fromhex(case["preimage"])).hexdigest()[:16] == case["digest"]
    assert spec_digest(w) == model_digest(w) == case["digest"]


def test_compressed_download_applies_to_its_replica_bit_for_bit():
    vector = json.loads((DOWNLINK / "delta.json").read_text())
    replica, new = weights(vector["replica"]), weights(vector["new_replica"])
    assert list(vector["shapes"]) == list(replica) != sorted(replica)  # entry order: the replica's, unsorted
    assert model_digest(replica) == vector["downlink-base"] and model_digest(new) == vector["downlink-digest"]
    blob = bytes.fromhex(vector["model-delta"])
    payloads = decode_bytes(blob, {k: tuple(s) for k, s in vector["shapes"].items()})
    assert encode_bytes(payloads) == blob
    applied = apply_download(replica, payloads)
    for k in replica:  # replica + decoded, one f32 addition per element
        spec = (replica[k].numpy().astype("<f4") + payloads[k].to_dense().numpy().astype("<f4")).view("<u4")
        assert np.array_equal(applied[k].numpy().view("<u4"), spec) and np.array_equal(new[k].numpy().view("<u4"), spec)


def test_reset_digest_is_the_models():
    vector = json.loads((DOWNLINK / "reset.json").read_text())
    assert vector["downlink-reset"] is True and spec_digest(weights(vector["arrays"])) == vector["digest"]
