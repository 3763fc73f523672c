"""The JVM client's compress + encode against fedgc's Python, on a mnist_cnn-sized update.

One random update shaped like fedgc's ``mnist_cnn`` state_dict (1,663,370 floats; N(0, 0.01)), one
round (fresh memory), density 0.001, dense small tensors, fp32 values, for DGC and top-k:

- time to compress (memory compensation, selection, memory update) and encode the blob: the JVM
  (clients/jvm, exact top-k; median of REPS after 5 warm-up runs, in one JVM) against fedgc's Python in
  this same run (median of REPS): DGC with sample_ratio 1.0 (the exact selection Java implements) and
  with fedgc's default 0.01 (sampled threshold), top-k (exact);
- bytes per upload (the update blob, and the 1-D uint8 .npy array Flower carries) from Java and
  Python for the same update, and whether the blobs are byte-identical (exact selection);
- the client jar's size with the protobuf runtime (``make jvm``'s fedgc-client.jar) and without it
  (the same classes, protobuf's com/google left out), and of the fedgc.wire/compress/train classes
  alone (what an app needs to compress, without the Flower transport).

Needs a JDK, protoc and protobuf-java (``make jvm``). The last line printed is one JSON object.

    .venv/bin/python bench/jvm_client.py [--reps 15] [--density 0.001]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import torch

from fedgc.compress.base import CompressionContext
from fedgc.compress.config import CompressionConfig
from fedgc.compress.update import build_compression, compress_update
from fedgc.flower.update_record import UPDATE_KEY, encode_update
from fedgc.models import build_model
from fedgc.wire.codec import encode_bytes

REPO = Path(__file__).resolve().parent.parent
JVM = REPO / "clients" / "jvm"
JAR = JVM / "build" / "fedgc-client.jar"
TESTS_JAR = JVM / "build" / "fedgc-client-tests.jar"


def python_time(delta: dict[str, torch.Tensor], config: CompressionConfig, reps: int) -> tuple[float, bytes, int]:
    """Median ms of compress + encode, the blob, and the bytes of the .npy array Flower carries."""
    times, blob, compressed = [], b"", None
    for _ in range(reps + 1):
        compressor, memory = build_compression(config)
        ctx = CompressionContext(round=1, density=config.density, num_clients=1)
        start = time.perf_counter()
        compressed = compress_update(delta, compressor, memory, ctx, dense_small_tensors=True, value_dtype="fp32")
        blob = encode_bytes(compressed.payloads)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[1:]), blob, len(encode_update(compressed.payloads)[UPDATE_KEY].data)


def jar_without(prefixes: tuple[str, ...], keep_only: tuple[str, ...] | None = None) -> int:
    """Size of fedgc-client.jar rebuilt (deflated, as `jar` does) without the entries under ``prefixes``."""
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(JAR) as source:
        target = Path(tmp) / "slim.jar"
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as out:
            for info in source.infolist():
                name = info.filename
                if name.startswith(prefixes) or (keep_only is not None and not name.startswith(keep_only)):
                    continue
                out.writestr(info, source.read(info), compress_type=zipfile.ZIP_DEFLATED)
        return target.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--density", type=float, default=0.001)
    args = parser.parse_args()
    build = subprocess.run(["make", "jvm"], cwd=REPO, capture_output=True, text=True, check=False)
    if build.returncode != 0:
        sys.exit(f"error: make jvm failed: {build.stderr.strip().splitlines()[-1:]}")

    model = build_model("mnist_cnn", (1, 28, 28), 10, seed=0)
    g = torch.Generator().manual_seed(0)
    delta = {k: torch.randn(v.shape, generator=g) * 0.01 for k, v in model.state_dict().items()}
    numel = sum(t.numel() for t in delta.values())

    results: dict = {"numel": numel, "density": args.density, "reps": args.reps}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "shapes.txt").write_text(
            "".join(f"{k} {'x'.join(map(str, v.shape))}\n" for k, v in delta.items()))
        flat = torch.cat([t.reshape(-1) for t in delta.values()]).numpy().astype("<f4")
        (tmp_path / "delta.f32").write_bytes(flat.tobytes())
        java = subprocess.run(["java", "-cp", f"{JAR}{os.pathsep}{TESTS_JAR}", "fedgc.cli.check.JvmBench", tmp,
                               repr(args.density), str(args.reps)], capture_output=True, text=True, check=False)
        if java.returncode != 0:
            sys.exit(f"error: JvmBench failed: {java.stderr.strip()[-500:]}")
        java_ms, java_npy = {}, {}
        for line in java.stdout.splitlines():
            name, median, _best, _size, npy = line.split()
            java_ms[name], java_npy[name] = float(median), int(npy)
        for name, sample_ratio in (("dgc", 1.0), ("topk", 1.0)):
            config = CompressionConfig(name=name, density=args.density, sample_ratio=sample_ratio)
            py_ms, py_blob, py_npy = python_time(delta, config, args.reps)
            java_blob = (tmp_path / f"java_{name}.bin").read_bytes()
            results[name] = {
                "java_compress_encode_ms": round(java_ms[name], 2),
                "python_compress_encode_ms": round(py_ms, 2),
                "java_upload_bytes": len(java_blob), "python_upload_bytes": len(py_blob),
                "java_array_bytes": java_npy[name], "python_array_bytes": py_npy,
                "byte_identical": java_blob == py_blob,
            }
            print(f"{name}: JVM {java_ms[name]:.1f} ms, Python {py_ms:.1f} ms; blob JVM {len(java_blob)} B, "
                  f"Python {len(py_blob)} B, identical: {java_blob == py_blob}")
        sampled_ms, sampled_blob, _ = python_time(delta, CompressionConfig(name="dgc", density=args.density), args.reps)
        results["dgc"]["python_sampled_compress_encode_ms"] = round(sampled_ms, 2)
        results["dgc"]["python_sampled_upload_bytes"] = len(sampled_blob)
        print(f"dgc (Python, fedgc's default sampled threshold): {sampled_ms:.1f} ms, {len(sampled_blob)} B")

    results["jar_bytes_with_protobuf"] = JAR.stat().st_size
    results["jar_bytes_without_protobuf"] = jar_without(("com/google/",))
    results["jar_bytes_wire_compress_train_only"] = jar_without((), keep_only=("fedgc/wire/", "fedgc/compress/",
                                                                              "fedgc/train/", "META-INF/"))
    results["java_version"] = subprocess.run(["java", "-version"], capture_output=True, text=True,
                                             check=False).stderr.splitlines()[0]
    results["torch_threads"] = torch.get_num_threads()
    print(f"jar: {results['jar_bytes_with_protobuf']} B with protobuf, {results['jar_bytes_without_protobuf']} B "
          f"without, {results['jar_bytes_wire_compress_train_only']} B for fedgc.wire/compress/train alone")
    print(json.dumps(results))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
