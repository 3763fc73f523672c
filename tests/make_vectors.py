"""Regenerate tests/vectors: ``python -m tests.make_vectors`` (docs/wire-format.md, "Test vectors").

* ``tests/vectors/*.json``: valid blobs (hex, shapes, decoded f32 values computed from the bytes by
  the spec's rules; deterministic compressors also their config and input). A vector of a random or
  BLAS-dependent compressor (powersgd's QR) keeps the bytes it has; deterministic ones are recomputed.
* ``tests/vectors/reject/blob.json``: malformed blobs and the reason a decoder must give, at least
  one per blob reason and one per precedence rule (``tests.reject_cases``).
* ``tests/vectors/reject/reply.json``: replies described as JSON (record layout, metrics, sender)
  and the reason the server must count, one or more per envelope and reply reason.
* ``tests/vectors/v3/*.json``: wire format v3 blobs (valid, with the encoder's input and arguments) and
  ``v3/reject.json``, its rejections (``tests.wire_v3_cases``).
* ``tests/vectors/downlink/*.json``: a compressed download (``model-delta`` and its two digests), a
  reset and digests with their SHA-256 preimage (docs/wire-format.md, "Downloads").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from fedgc.compress.base import CompressionContext
from fedgc.compress.config import CompressionConfig
from fedgc.compress.downlink import DownlinkConfig, apply_download, make_download, model_digest
from fedgc.compress.payloads import LowRankPayload
from fedgc.compress.update import build_compression, compress_update
from fedgc.wire.codec import decode_bytes, encode_bytes
from tests.reject_cases import blob_cases, reply_cases
from tests.wire_v3_cases import payload_input
from tests.wire_v3_cases import reject_cases as v3_reject_cases
from tests.wire_v3_cases import valid_cases as v3_valid_cases

VECTORS = Path(__file__).parent / "vectors"


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def _decoded(blob: bytes, shapes: dict) -> dict[str, list[float]]:
    """The spec's decoded values (docs/wire-format.md), from the bytes, not from the compressor."""
    return {k: p.to_dense().flatten().tolist() for k, p in decode_bytes(blob, shapes).items()}


def compressor_vectors() -> None:
    shapes = {"w": (2, 6), "b": (3,)}
    g = torch.Generator().manual_seed(5)
    tensors = {k: torch.randn(s, generator=g).mul(4).round().div(4) for k, s in shapes.items()}
    g = torch.Generator().manual_seed(9)
    wide = {"m": (8, 6), "b": (3,)}
    wide_tensors = {k: torch.randn(s, generator=g).mul(8).round().div(8) for k, s in wide.items()}
    index = {"w": (4, 16), "tie": (16,), "bitmap": (8,)}
    # ±x pairs: equal magnitudes, so the vectors also pin top-k's tie rule (lowest index first; "tie" keeps 7.5, not -7.5)
    index_tensors = {k: torch.randperm(int(np.prod(s)), generator=g).float().sub(7.5).reshape(s)
                     for k, s in index.items()}
    cases = [  # (file, kind, compressor, extra config, deterministic?, shapes, tensors)
        ("dense", "dense", "none", {}, True), ("dense_fp16", "dense", "fp16", {}, True),
        ("sparse_varint", "sparse", "topk", {"density": 0.25}, True),  # bitmap mode despite its name (kept)
        ("sparse_bitmap_fp16", "sparse", "topk", {"density": 0.9, "value_dtype": "fp16"}, True),
        ("sign", "sign", "onebit", {}, True), ("vote", "vote", "signsgd", {}, True),
        ("stc", "stc", "stc", {"density": 0.25}, True), ("ternary", "ternary", "terngrad", {}, False),
        ("qsgd", "qsgd", "qsgd", {"qsgd_levels": 3, "qsgd_bucket_size": 4}, False),
        ("natural", "natural", "natural", {}, False), ("lowrank", "lowrank", "powersgd", {"powersgd_rank": 1}, False),
        # new in wire format v2 (document version; the blob is still version 1)
        ("sparse_index_mode0", "sparse", "topk", {"density": 0.0625}, True, index, index_tensors),
        ("qsgd_partial_bucket", "qsgd", "qsgd", {"qsgd_levels": 7, "qsgd_bucket_size": 5}, False, wide, wide_tensors),
        ("qsgd_bucket_over_n", "qsgd", "qsgd", {"qsgd_levels": 15, "qsgd_bucket_size": 512}, False, wide, wide_tensors),
        ("lowrank_rank2", "lowrank", "powersgd", {"powersgd_rank": 2}, False, wide, wide_tensors),
        ("lowrank_rank3_fp16", "lowrank", "powersgd", {"powersgd_rank": 3, "value_dtype": "fp16"}, False, wide,
         wide_tensors),
    ]
    for file, kind, name, extra, deterministic, *given in cases:
        case_shapes, case_tensors = given or (shapes, tensors)
        config = {"name": name, "density": 0.5, "dense_small_tensors": False, **extra}
        cfg = CompressionConfig(**config)
        compressor, memory = build_compression(cfg)
        out = compress_update(case_tensors, compressor, memory,
                              CompressionContext(density=cfg.density, generator=torch.Generator().manual_seed(1)),
                              dense_small_tensors=False, value_dtype=cfg.value_dtype)
        blob = encode_bytes(out.payloads)
        existing = VECTORS / f"{file}.json"
        if not deterministic and existing.exists():  # random (or BLAS-dependent) output: the bytes stay
            blob = bytes.fromhex(json.loads(existing.read_text())["hex"])
        vector = {"kind": kind, "compressor": name, "shapes": case_shapes, "hex": blob.hex(),
                  "decoded": _decoded(blob, case_shapes)}
        if deterministic:
            vector.update(config=config, input={k: v.flatten().tolist() for k, v in case_tensors.items()})
        _write(VECTORS / f"{file}.json", vector)


def lowrank_order_vector() -> None:
    """Rank 3, where the order of the sum, the +0 start and rounding each product are all visible:
    row 0 · col 0 = (1e8 + 1) − 1e8 = 0 in order (1 in another order); row 1 gives +0, not −0."""
    p = torch.tensor([[1e8, 1.0, -1e8], [-1.0, -1.0, -1.0], [0.1, 0.2, 0.3]], dtype=torch.float32)
    q = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [3.0, 1e-3, 7.0]], dtype=torch.float32)
    shapes = {"m": (3, 3)}
    blob = encode_bytes({"m": LowRankPayload(p=p, q=q, shape=shapes["m"])})
    _write(VECTORS / "lowrank_order.json", {"kind": "lowrank", "compressor": "powersgd", "shapes": shapes,
                                            "hex": blob.hex(), "decoded": _decoded(blob, shapes)})


def _values(weights: dict[str, torch.Tensor]) -> dict[str, dict]:
    return {k: {"shape": list(v.shape), "values": v.flatten().tolist()} for k, v in weights.items()}


def digest_preimage(weights: dict[str, torch.Tensor]) -> bytes:
    """The spec's recipe written out: per name in code-point order, UTF-8 of name + Python's tuple
    repr of the shape, then the f32 little-endian values."""
    return b"".join(f"{k}{tuple(weights[k].shape)}".encode() + weights[k].numpy().astype("<f4").tobytes()
                    for k in sorted(weights))


def downlink_vectors() -> None:
    g = torch.Generator().manual_seed(11)
    # key order is the model's, not sorted: the digest sorts, the blob does not
    replica = {"fc.weight": torch.randn(3, 8, generator=g), "fc.bias": torch.randn(3, generator=g),
               "bn.num_batches_tracked": torch.tensor(4.0), "Conv.w": torch.randn(2, 2, generator=g)}
    target = {k: v + torch.randn(v.shape, generator=g).mul(0.25) for k, v in replica.items()}
    config = DownlinkConfig(name="topk", density=0.25)
    download = make_download(target, replica, config, config.compressor())
    blob = encode_bytes(download.payloads)
    shapes = {k: list(v.shape) for k, v in replica.items()}
    applied = apply_download(replica, decode_bytes(blob, {k: tuple(s) for k, s in shapes.items()}))
    assert all(torch.equal(applied[k], download.replica[k]) for k in replica)
    _write(VECTORS / "downlink" / "delta.json", {
        "about": "a compressed download: config downlink-base = digest(replica), model-delta = the blob "
                 "(entries in the replica's key order), replica + decoded = new_replica, downlink-digest",
        "replica": _values(replica), "downlink-base": model_digest(replica), "compressor": "topk",
        "density": config.density, "shapes": shapes, "model-delta": blob.hex(),
        "new_replica": _values(download.replica), "downlink-digest": model_digest(download.replica)})
    _write(VECTORS / "downlink" / "reset.json", {
        "about": "a reset: arrays = the whole model (float32), config downlink-reset = true; the client "
                 "adopts arrays as its replica, whose digest the server records",
        "arrays": _values(target), "downlink-reset": True, "digest": model_digest(target)})
    cases = [{"b": torch.tensor([0.5, -1.0]), "w": torch.tensor([[1.0, 2.0], [3.0, 4.0]])},
             {"scalar": torch.tensor(-0.0), "empty": torch.zeros(0, 3)}, replica]
    _write(VECTORS / "downlink" / "digest.json", {
        "about": "digest = first 16 hex digits of SHA-256(preimage); preimage per docs/wire-format.md",
        "cases": [{"weights": _values(w), "preimage": digest_preimage(w).hex(), "digest": model_digest(w)}
                  for w in cases]})


def v3_vectors() -> None:
    for name, payloads, values, block in v3_valid_cases():
        shapes = {k: list(p.shape) for k, p in payloads.items()}
        blob = encode_bytes(payloads, version=3, values=values, block=block)
        _write(VECTORS / "v3" / f"{name}.json", {
            "shapes": shapes, "hex": blob.hex(), "decoded": _decoded(blob, shapes),
            "encode": {"version": 3, "values": values, "block": block}, "input": payload_input(payloads)})
    _write(VECTORS / "v3" / "reject.json",
           {"about": "malformed wire format v3 blobs: decoding hex against shapes must fail with reason "
                     "(docs/wire-format.md, Format v3)", "cases": v3_reject_cases()})


def main() -> None:
    compressor_vectors()
    v3_vectors()
    lowrank_order_vector()
    downlink_vectors()
    _write(VECTORS / "reject" / "blob.json",
           {"about": "malformed update blobs: decoding hex against shapes must fail with reason "
                     "(docs/wire-format.md, Validation)", "cases": blob_cases()})
    _write(VECTORS / "reject" / "reply.json",
           {"about": "training replies the server must reject with reason (docs/wire-format.md); "
                     "layout in tests/reject_cases.py", "replies": reply_cases()})


if __name__ == "__main__":
    main()
