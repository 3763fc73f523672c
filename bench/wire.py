"""Wire format v3 against version 1 and against the floors, side by side in one run
(docs/wire-format.md, "Format v3").

* bits per index of random sparse patterns at densities 0.01 and 0.001: version 1's index block
  (varint gaps), v3's Golomb–Rice block with the encoder's rule, with the best Rice parameter, and the
  floor (the entropy of a random pattern, H(p)/p ≈ log2(1/p) + 1.44);
* bits per value of each value encoding (scales included) against the zeroth-order entropy of its
  codes (what an ideal entropy coder of those codes would need), and the relative L2 error of what
  the receiver sees, per tensor and per block of 256;
* the whole blob of one 25.5M-entry update at density 0.001 (one tensor, as large as ResNet-50):
  dense fp32 / blob per encoding;
* encode + decode time of that update, version 1 fp32 against v3 per encoding (median of interleaved
  repeats; the target is v3 ≤ 1.5× version 1).

Random updates only: no real DGC update, no training. The last line is one JSON object.

    .venv/bin/python bench/wire.py            # ~1 min
    .venv/bin/python bench/wire.py --tiny     # a smoke run (smaller tensors, fewer repeats)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

from fedgc.compress.payloads import SparsePayload
from fedgc.wire.codec import decode_bytes, encode_bytes
from fedgc.wire.golomb import encode_rice, max_rice_parameter, stream_bits
from fedgc.wire.quantize import ENCODINGS, block_count, encode_values, value_bits
from fedgc.wire.varint import encode_indices

REPO = Path(__file__).resolve().parents[1]
DENSITIES = (0.01, 0.001)


def floor_bits_per_index(p: float) -> float:
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p)) / p


def random_pattern(n: int, density: float, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(n, max(1, math.ceil(n * density)), replace=False))


def index_figures(n: int, rng: np.random.Generator) -> dict:
    out = {}
    for p in DENSITIES:
        idx = random_pattern(n, p, rng)
        gaps = np.diff(idx, prepend=-1) - 1
        best = min(stream_bits(gaps, b) for b in range(max_rice_parameter(n) + 1))
        out[str(p)] = {"v1": 8 * encode_indices(idx, n).size / idx.size, "v3": 8 * encode_rice(idx, n).size / idx.size,
                       "v3_best_b": best / idx.size, "floor": floor_bits_per_index(p),
                       "floor_approx": math.log2(1 / p) + 1.4427}
    return out


def code_entropy(codes: torch.Tensor) -> float:
    _, counts = np.unique(codes.numpy(), return_counts=True)
    q = counts / counts.sum()
    return float(-(q * np.log2(q)).sum())


def value_figures(values: torch.Tensor) -> dict:
    out = {}
    for encoding in ENCODINGS:
        row = {}
        for block in (0, 256):
            coded = encode_values(values, encoding, block)
            err = float((coded.dequantized - values).norm() / values.norm())
            sent = value_bits(encoding) + 32 * block_count(values.numel(), block) / values.numel()
            row[f"block_{block}"] = {"bits": sent, "rel_l2_error": err,
                                     "code_entropy": None if encoding in ("fp32", "fp16") else code_entropy(coded.codes)}
        out[encoding] = row
    return out


def timed(payload: dict, shapes: dict, version: int, values: str | None) -> float:
    start = time.perf_counter()
    decode_bytes(encode_bytes(payload, version=version, values=values), shapes)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="small tensors and 3 repeats: a smoke run")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    n_pattern, n_update, repeats = (200_000, 255_570, 3) if args.tiny else (4_000_000, 25_557_032, args.repeats)
    rng = np.random.default_rng(0)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    print(f"bench/wire.py, {datetime.date.today()}, main at {commit} (+ uncommitted changes if any), "
          f"CPU kernels {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}")

    indices = index_figures(n_pattern, rng)
    print(f"\nbits per index, random patterns of {n_pattern:,} entries")
    print(f"{'density':>8} {'v1 varint':>10} {'v3 rice':>8} {'best b':>7} {'floor':>7}")
    for p, row in indices.items():
        print(f"{p:>8} {row['v1']:>10.3f} {row['v3']:>8.3f} {row['v3_best_b']:>7.3f} {row['floor']:>7.3f}")

    k = math.ceil(n_update * 0.001)
    idx = torch.from_numpy(random_pattern(n_update, 0.001, rng))
    # top-k of a Gaussian update keeps its tails: values of magnitude above the (1 − p) quantile
    raw = rng.standard_normal(k * 20).astype(np.float32)
    values = torch.from_numpy(raw[np.argsort(-np.abs(raw))[:k]][rng.permutation(k)].copy())
    per_value = value_figures(values)
    print(f"\nbits per value, {k:,} values (the largest |x| of a Gaussian, as top-k keeps), blocks: per tensor | 256")
    print(f"{'encoding':>8} {'bits':>13} {'code entropy':>14} {'rel. L2 error':>20}")
    for encoding, row in per_value.items():
        a, b = row["block_0"], row["block_256"]
        ent = "—" if a["code_entropy"] is None else f"{a['code_entropy']:.2f} | {b['code_entropy']:.2f}"
        print(f"{encoding:>8} {a['bits']:>6.2f} | {b['bits']:<5.2f} {ent:>14} "
              f"{a['rel_l2_error']:>9.2e} | {b['rel_l2_error']:.2e}")

    payload = {"x": SparsePayload(indices=idx, values=values, shape=(n_update,))}
    shapes = {"x": (n_update,)}
    dense = 1 + 2 + 4 * n_update  # a version 1 dense fp32 blob: version, kind, dtype, values
    cases = [("v1_fp32", 1, None)] + [(f"v3_{e}", 3, e) for e in ENCODINGS]
    sizes = {name: len(encode_bytes(payload, version=v, values=e)) for name, v, e in cases}
    times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for _ in range(repeats):  # interleaved, so that load on the machine hits every case alike
        for name, v, e in cases:
            times[name].append(timed(payload, shapes, v, e))
    ms = {name: 1e3 * statistics.median(t) for name, t in times.items()}
    print(f"\none update of {n_update:,} entries at density 0.001 ({k:,} kept): blob, ratio to dense fp32, "
          f"encode + decode (median of {repeats})")
    print(f"{'blob':>10} {'bytes':>9} {'ratio':>8} {'bits/kept':>10} {'ms':>7} {'vs v1':>6}")
    for name, _, _ in cases:
        print(f"{name:>10} {sizes[name]:>9,} {dense / sizes[name]:>8.1f} {8 * sizes[name] / k:>10.2f} "
              f"{ms[name]:>7.2f} {ms[name] / ms['v1_fp32']:>6.2f}")
    print("\nnot measured here: accuracy_gap_pp and tta_3g_speedup (no training runs in this bench yet), "
          "nor the Flower message around the blob (about 1 KB a reply)")
    print(json.dumps({
        "bench": "wire", "tiny": args.tiny, "commit": commit, "date": str(datetime.date.today()),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "bits_per_index": indices,
        "bits_per_value": per_value, "blob_bytes": sizes,
        "ratio_vs_dense": {name: dense / size for name, size in sizes.items()},
        "codec_ms": ms, "codec_vs_v1": {name: t / ms["v1_fp32"] for name, t in ms.items()},
        "update_entries": n_update, "kept": k}))


if __name__ == "__main__":
    main()
