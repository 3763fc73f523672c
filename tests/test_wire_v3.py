"""Wire format v3 (docs/wire-format.md, "Format v3"): Golomb–Rice index gaps and sub-16-bit value
encodings. Round trips bit for bit, what the receiver sees is what ``quantize`` says, the vectors in
tests/vectors/v3 both ways, every rejection vector with its reason, hostile blobs refused in one
line before anything is sized by them, version 1 still decoded, and bits per index near the floor."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgc.compress.payloads import CodedSparsePayload, SparsePayload
from fedgc.wire.codec import CodecError, decode_bytes, encode_bytes
from fedgc.wire.golomb import decode_rice, encode_rice, max_rice_parameter, rice_parameter, stream_bits
from fedgc.wire.quantize import ENCODINGS, quantize
from fedgc.wire.reasons import BLOB
from fedgc.wire.varint import encode_indices
from tests.wire_v3_cases import payloads_from_input, reject_cases

REPO = Path(__file__).resolve().parents[1]
V3 = Path(__file__).parent / "vectors" / "v3"
VALID = sorted(p for p in V3.glob("*.json") if p.stem != "reject")
REJECTS = json.loads((V3 / "reject.json").read_text())["cases"]


def shapes_of(vector: dict) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v) for k, v in vector["shapes"].items()}


def bits(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).flatten().numpy().view("<u4")


@st.composite
def sparse_payloads(draw):
    numel = draw(st.integers(1, 2000))
    chosen = sorted(draw(st.sets(st.integers(0, numel - 1), max_size=min(numel, 300))))
    magnitude = draw(st.sampled_from([1e-30, 1e-3, 1.0, 1e4, 1e30]))
    values = torch.tensor(draw(st.lists(st.floats(-1, 1, width=32), min_size=len(chosen), max_size=len(chosen))),
                          dtype=torch.float32) * magnitude
    return SparsePayload(torch.tensor(chosen, dtype=torch.int64), values, (numel,))


@settings(max_examples=300, deadline=None)
@given(sparse_payloads(), st.sampled_from(ENCODINGS), st.sampled_from([0, 1, 3, 64, 10**6]))
def test_any_sparse_payload_round_trips_and_the_receiver_sees_quantize(payload, encoding, block):
    blob = encode_bytes({"x": payload}, version=3, values=encoding, block=block)
    (decoded,) = decode_bytes(blob, {"x": payload.shape}).values()
    assert torch.equal(decoded.indices, payload.indices)
    assert np.array_equal(bits(decoded.values), bits(quantize(payload.values, encoding, block)))
    assert np.array_equal(bits(decoded.to_dense()), bits(SparsePayload(
        payload.indices, quantize(payload.values, encoding, block), payload.shape).to_dense()))
    assert encode_bytes({"x": decoded}, version=3) == blob  # what was decoded re-encodes to the same bytes


@pytest.mark.parametrize("encoding", ["int8", "int4"])
@pytest.mark.parametrize("block", [0, 16])
def test_integer_codes_are_the_nearest_level_of_the_block_scale(encoding, block):
    levels = {"int8": 127, "int4": 7}[encoding]
    values = torch.randn(100, generator=torch.Generator().manual_seed(0))
    sent = quantize(values, encoding, block)
    width = 100 if block == 0 else block
    for start in range(0, 100, width):
        v, s = values[start:start + width], sent[start:start + width]
        scale = v.abs().max() / levels
        assert (s - v).abs().max() <= scale / 2 * (1 + 1e-5)  # rounding error at most half a step
        assert torch.allclose(s.abs().max(), v.abs().max())  # the largest magnitude is sent exactly (± rounding)


def test_sign_sends_the_mean_magnitude_per_block():
    values = torch.tensor([1.0, -3.0, 2.0, -0.5, 4.0])
    assert torch.equal(quantize(values, "sign", 0), torch.tensor([2.1, -2.1, 2.1, -2.1, 2.1]))
    assert quantize(values, "sign", 2).tolist() == [2.0, -2.0, 1.25, -1.25, 4.0]


def test_quantize_keeps_shape_and_fp32_is_lossless():
    values = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    assert torch.equal(quantize(values, "fp32"), values)
    assert quantize(values, "int4").shape == (3, 4)
    residual = values - quantize(values, "int8")  # what error feedback keeps
    assert 0 < residual.abs().max() <= values.abs().max() / 127 / 2 * (1 + 1e-5)


def test_encoder_arguments_are_checked():
    payload = {"x": SparsePayload(torch.tensor([1]), torch.tensor([1.0]), (4,))}
    with pytest.raises(ValueError, match="version=3"):
        encode_bytes(payload, values="int8")
    with pytest.raises(ValueError, match="version 2"):
        encode_bytes(payload, version=2)
    with pytest.raises(ValueError, match="unknown value encoding"):
        encode_bytes(payload, version=3, values="int3")
    with pytest.raises(ValueError, match="finite"):
        quantize(torch.tensor([1.0, float("nan")]), "int8")


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_v3_vector_decodes_bit_exactly_and_encodes_from_its_input(path):
    vector = json.loads(path.read_text())
    blob, shapes = bytes.fromhex(vector["hex"]), shapes_of(vector)
    assert blob[0] == 3
    decoded = decode_bytes(blob, shapes)
    for key, values in vector["decoded"].items():
        assert np.array_equal(bits(decoded[key].to_dense()), np.array(values, dtype="<f4").view("<u4")), key
    assert encode_bytes(decoded, version=3) == blob
    args = vector["encode"]
    assert encode_bytes(payloads_from_input(vector["input"], shapes), version=args["version"],
                        values=args["values"], block=args["block"]).hex() == vector["hex"]


def test_v3_vectors_cover_every_encoding_blocks_and_an_empty_entry():
    vectors = [json.loads(p.read_text()) for p in VALID]
    payloads = [p for v in vectors for p in decode_bytes(bytes.fromhex(v["hex"]), shapes_of(v)).values()]
    coded = [p for p in payloads if isinstance(p, CodedSparsePayload)]
    assert {p.encoding for p in coded} == {"int8", "int4", "sign"}
    assert any(p.block and p.indices.numel() % p.block for p in coded)  # a partial last block
    assert any(isinstance(p, SparsePayload) and p.indices.numel() == 0 for p in payloads)
    assert {v["encode"]["values"] for v in vectors} >= set(ENCODINGS)


def test_the_stored_v3_rejection_vectors_are_the_generated_ones():
    assert REJECTS == json.loads(json.dumps(reject_cases()))


@pytest.mark.parametrize("case", REJECTS, ids=lambda c: c["name"])
def test_v3_rejection_vector(case):
    with pytest.raises(CodecError) as err:
        decode_bytes(bytes.fromhex(case["hex"]), shapes_of(case))
    assert err.value.reason == case["reason"]
    assert "\n" not in str(err.value)  # a one-line refusal


def test_v3_rejections_use_only_the_blob_reasons_and_most_of_them():
    reasons = {c["reason"] for c in REJECTS}
    assert reasons <= set(BLOB)
    assert set(BLOB) - reasons == {"bad-rank"}  # lowrank's body is version 1's, its vectors are there


def test_version_1_blobs_still_decode_and_version_2_is_refused():
    payload = {"x": SparsePayload(torch.tensor([2, 9]), torch.tensor([1.5, -2.0]), (16,))}
    v1 = encode_bytes(payload)
    assert v1[0] == 1 and torch.equal(decode_bytes(v1, {"x": (16,)})["x"].to_dense(), payload["x"].to_dense())
    with pytest.raises(CodecError, match="bad-version"):
        decode_bytes(bytes([2]) + v1[1:], {"x": (16,)})


@pytest.mark.parametrize("claim", [10**9, 2**40])
def test_a_huge_claim_is_refused_without_allocating_for_it(claim):
    """k and the shape say a billion entries; the blob holds a few bytes: refused as truncated, with
    allocations bounded by the blob, not by k or n."""
    from fedgc.wire.varint import encode_varints

    blob = bytes([3, 1, 2]) + encode_varints(np.array([claim])).tobytes() + bytes([0]) + b"\x00" * 64
    tracemalloc.start()
    with pytest.raises(CodecError) as err:
        decode_bytes(blob, {"x": (claim,)})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert err.value.reason == "truncated" and peak < 1_000_000


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ENCODINGS), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
       st.integers(0, 10**6), st.binary(max_size=8))
def test_corrupted_v3_blobs_are_refused_or_decode_to_finite_values(encoding, edits, cut, tail):
    g = torch.Generator().manual_seed(2)
    shapes = {"w": (40, 30), "b": (30,)}
    payloads = {k: SparsePayload(torch.randperm(math.prod(s), generator=g)[:25].sort().values,
                                 torch.randn(25, generator=g), s) for k, s in shapes.items()}
    data = bytearray(encode_bytes(payloads, version=3, values=encoding, block=7))
    for position, byte in edits:
        data[position % len(data)] = byte
    data = data[: max(1, cut % (len(data) + 1))] + tail if cut % 3 == 0 else data
    try:
        decoded = decode_bytes(bytes(data), shapes)
    except CodecError as err:
        assert err.reason in BLOB
        return
    for key, shape in shapes.items():
        dense = decoded[key].to_dense()
        assert dense.shape == shape and torch.isfinite(dense).all()


@pytest.mark.parametrize("density", [0.5, 0.1, 0.01, 0.001])
def test_rice_rule_is_near_the_best_parameter_and_the_floor(density):
    n = 1_000_000
    rng = np.random.default_rng(0)
    indices = np.sort(rng.choice(n, max(1, int(n * density)), replace=False))
    gaps = np.diff(indices, prepend=-1) - 1
    b = rice_parameter(int(gaps.sum()), indices.size)
    best = min(range(max_rice_parameter(n) + 1), key=lambda c: stream_bits(gaps, c))
    assert stream_bits(gaps, b) <= stream_bits(gaps, best) + 0.1 * indices.size
    block = encode_rice(indices, n)
    decoded, used = decode_rice(block, n)
    assert np.array_equal(decoded, indices) and used == block.size
    entropy = -(density * math.log2(density) + (1 - density) * math.log2(1 - density)) / density
    assert 8 * block.size / indices.size <= entropy + 0.15  # bits per index: within 0.15 of the floor
    v1 = encode_indices(indices, n).size
    if density <= 0.1:
        assert block.size < v1  # below version 1's index block
    else:  # dense patterns: version 1's bitmap, plus at most k's varint and b
        assert block.size <= v1 + 4


def test_bench_wire_runs_tiny_and_ends_with_one_json_object():
    proc = subprocess.run([sys.executable, "bench/wire.py", "--tiny"], check=False, cwd=REPO, capture_output=True,
                          text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {"bits_per_index", "bits_per_value", "ratio_vs_dense", "codec_ms", "message_codec_ms"} <= set(figures)
    assert set(figures["message_codec_ms"]) == {f"{m}/{v}" for m in ("2nn_dgc_0.01", "300_tensors") for v in ("v1", "v3_int8")}
    assert all(row["encode_ms"] > 0 and row["decode_ms"] > 0 for row in figures["message_codec_ms"].values())
    assert "accuracy_gap_pp" not in figures and "tta_3g_speedup" not in figures
    assert figures["bits_per_index"]["0.001"]["v3"] < figures["bits_per_index"]["0.001"]["v1"]
    # --write's codec block, from these figures: a row per density, value encoding, blob and message
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import wire
    finally:
        sys.path.remove(str(REPO / "bench"))
    block = wire.codec_block(figures["bits_per_index"], figures["bits_per_value"], figures["blob_bytes"],
                             figures["codec_ms"], figures["message_codec_ms"], figures["update_entries"],
                             figures["kept"], 3, "abc1234", "AVX2", "2026-11-27", ".venv/bin/python bench/wire.py --write")
    assert block.startswith(wire.CODEC_BEGIN) and block.endswith(wire.CODEC_END) and "main at abc1234" in block
    assert "Written by `.venv/bin/python bench/wire.py --write` (2026-11-27" in block
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| density")]
    assert len(rows) == 2 + 5 + len(figures["blob_bytes"]) + 4 + 3  # with the three header rows after the first
    assert f"| v3_sign | {figures['blob_bytes']['v3_sign']:,} |" in block


def test_bench_wire_times_3g_runs_to_target_and_keeps_its_runs_in_folders(tmp_path):
    """``--tta-3g``: the dense run and each compressed-both-ways run of the 3G scenario, their simulated
    time to target and bytes; ``tta_3g_speedup`` is dense's time over the fastest's (None when, as in
    two rounds, no run reaches the target). With ``--accuracy-out`` the accuracy runs are run folders
    too; a finished run folder is reused, not run again."""
    from .conftest import shared_dir

    env = {**os.environ, "FEDGC_DATA_DIR": str(shared_dir() / "data"), "FEDGC_TRACE_DIR": str(shared_dir() / "traces")}
    command = [sys.executable, "bench/wire.py", "--tiny", "--accuracy-rounds", "2", "--encodings", "fp32,int4",
               "--accuracy-out", str(tmp_path / "accuracy"), "--tta-3g", "--tta-rounds", "2",
               "--tta-densities", "0.1", "--tta-encodings", "int4", "--tta-out", str(tmp_path), "--jobs", "2"]
    proc = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    runs = figures["tta_3g"]
    assert list(runs) == ["dense", "int4 0.1"]
    assert runs["int4 0.1"]["bytes_up"] < runs["dense"]["bytes_up"] / 20  # 10% of the entries in 4 bits
    assert runs["int4 0.1"]["bytes_down"] < runs["dense"]["bytes_down"] / 20
    assert figures["tta_3g_speedup"] is None and figures["tta_3g_best"] is None  # 2 rounds: 90% not reached
    accuracy = {(r["encoding"], r["seed"]): r["final_accuracy"] for r in figures["accuracy"]["runs"]}
    assert set(accuracy) == {("fp32", 0), ("int4", 0)}
    kept = [tmp_path / "seed0" / "dense" / "metrics.jsonl", tmp_path / "accuracy" / "seed0" / "int4" / "metrics.jsonl",
            tmp_path / "accuracy" / "seed0" / "dense" / "metrics.jsonl"]  # the accuracy section's dense reference
    written = [path.stat().st_mtime_ns for path in kept]
    again = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    second = json.loads(again.stdout.strip().splitlines()[-1])
    assert second["tta_3g"] == runs
    assert {(r["encoding"], r["seed"]): r["final_accuracy"] for r in second["accuracy"]["runs"]} == accuracy
    assert [path.stat().st_mtime_ns for path in kept] == written


def bench_wire():
    """bench/wire.py as a module (it puts bench/ on sys.path for its results_block helper itself)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_wire", REPO / "bench" / "wire.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv", [["--tiny", "--write"], ["--accuracy-rounds", "0", "--write"],
                                  ["--accuracy-rounds", "2", "--seeds", "0,1", "--write"]])
def test_bench_wire_refuses_write_with_nothing_to_write(monkeypatch, capsys, argv):
    """``--write`` writes the 3G table (``--tta-3g``) and the accuracy table (accuracy runs of at least 3
    seeds); with neither it is a one-line parser error, before anything runs."""
    wire = bench_wire()
    monkeypatch.setattr(sys, "argv", ["bench/wire.py", *argv])
    with pytest.raises(SystemExit) as stop:
        wire.parse_args()
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and "Traceback" not in "\n".join(err)
    assert err[-1].endswith("--write: nothing to write (give --tta-3g, or accuracy runs of at least 3 seeds)")


def test_bench_wire_keeps_the_encoding_within_reach_of_fp32_and_of_dense():
    """An encoding 0.2 points below fp32 values but 0.5 below dense is not kept, however small its
    message; one above both (negative gaps) is; without dense runs only the gap to fp32 counts."""
    wire = bench_wire()

    def row(gap: float, gap_dense: float | None, ratio: float) -> dict:
        return {"gap_pp": gap, "gap_dense_pp": gap_dense, "ratio_at_density": ratio, "rejected": 0, "failed": 0}

    figures = {"fp32": row(0.0, 0.3, 700.0), "int4": row(0.2, 0.5, 1500.0)}
    assert wire.best_kept(figures)[0] == "fp32"
    assert wire.best_kept({**figures, "sign": row(-0.1, -0.4, 1800.0)})[0] == "sign"
    assert wire.best_kept({e: {**f, "gap_dense_pp": None} for e, f in figures.items()})[0] == "int4"
    assert wire.best_kept({"fp32": row(0.0, 0.31, 700.0), "int4": row(0.2, 0.5, 1500.0)}) is None
    # the gaps from the runs: reference mean − the encoding's mean, in points
    runs = [{"encoding": e, "seed": s, "final_accuracy": a, "ratio_run": 1.0, "ratio_at_density": None,
             "reply_bytes_at_density": None, "rejected": 0, "failed": 0}
            for e, s, a in (("fp32", 0, 0.980), ("fp32", 1, 0.984), ("int4", 0, 0.979), ("int4", 1, 0.981))]
    dense = [{**r, "encoding": "dense", "final_accuracy": a} for r, a in zip(runs[:2], (0.986, 0.988), strict=True)]
    got = wire.accuracy_figures(runs, ["fp32", "int4"], dense)
    assert got["int4"]["gap_pp"] == pytest.approx(0.2) and got["int4"]["gap_dense_pp"] == pytest.approx(0.7)
    assert got["fp32"]["gap_dense_pp"] == pytest.approx(0.5)
    assert wire.accuracy_figures(runs, ["fp32", "int4"])["int4"]["gap_dense_pp"] is None


def test_bench_wire_writes_its_accuracy_table_with_a_dense_reference(tmp_path):
    """Accuracy runs of 3 seeds with ``--write``: a dense run per seed beside the encodings' (in this
    process here; the 3G test above shows it kept as ``seed<k>/dense`` and reused with ``--accuracy-out``),
    ``gap_dense_pp`` per encoding in the JSON, and the ``wire-accuracy`` block of the results file
    (``--results``: here a copy of docs/results.md) rewritten with a row per encoding and dense, the
    command that makes it again and a verdict; the text around the block is left alone."""
    from .conftest import shared_dir

    results = tmp_path / "results.md"
    original = (REPO / "docs" / "results.md").read_text()
    results.write_text(original)
    docs_written = (REPO / "docs" / "results.md").stat().st_mtime_ns
    env = {**os.environ, "FEDGC_DATA_DIR": str(shared_dir() / "data")}
    command = [sys.executable, "bench/wire.py", "--tiny", "--accuracy-rounds", "2", "--encodings", "fp32,int4",
               "--seeds", "0,1,2", "--set", "compression.warmup_rounds=0", "--set", "data.max_train_samples=512",
               "--set", "data.max_test_samples=256", "--write", "--results", str(results)]
    proc = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    accuracy = json.loads(proc.stdout.strip().splitlines()[-1])["accuracy"]
    dense_mean = accuracy["dense"]["final_accuracy_mean"]
    assert [r["seed"] for r in accuracy["dense_runs"]] == [0, 1, 2]
    assert list(accuracy["figures"]) == ["fp32", "int4"]
    for f in accuracy["figures"].values():
        assert f["gap_dense_pp"] == pytest.approx(100 * (dense_mean - f["final_accuracy_mean"]))
        assert f["reply_bytes_at_density"] < accuracy["dense"]["reply_bytes_at_density"] / 100
    assert all(r["bytes_up"] >= r["dense_bytes_up"] for r in accuracy["dense_runs"])  # dense fp32: nothing compressed
    begin, end = "<!-- wire-accuracy:begin -->", "<!-- wire-accuracy:end -->"
    text = results.read_text()
    head, rest = text.split(begin)
    block, tail = rest.split(end)
    assert head == original.split(begin)[0] and tail == original.split(end)[1]
    rows = [line.split(" | ")[0] for line in block.splitlines() if line.startswith("| ")]
    assert rows == ["| values", "| fp32", "| int4", "| dense"]
    assert "bench/wire.py --tiny --accuracy-rounds 2 --set compression.warmup_rounds=0" in block
    assert "--encodings fp32,int4 --seeds 0,1,2 --write" in block
    assert block.strip().splitlines()[-1].startswith(("No encoding kept", "Best within 0.3 points"))
    assert (REPO / "docs" / "results.md").stat().st_mtime_ns == docs_written
