"""Every compressor: shapes and dtypes, unbiasedness where claimed, the error-feedback invariant,
exact bit-packing sizes, state that survives the client's context.state, and aggregation."""

from __future__ import annotations

import math

import pytest
import torch

from fedgc.compress import compressor_names
from fedgc.compress.aggregate import aggregate_payloads
from fedgc.compress.base import CompressionContext, LowRankPayload, VotePayload
from fedgc.compress.bits import PackingError, pack_bits, pack_trits, pack_uint, unpack_bits, unpack_trits, unpack_uint
from fedgc.compress.config import CompressionConfig
from fedgc.compress.memory import NoMemory
from fedgc.compress.topk import topk_indices
from fedgc.compress.update import build_compression, compress_update
from fedgc.wire.codec import encode_bytes

NAMES = compressor_names()
BASELINES = [n for n in NAMES if n != "dgc"]  # DGC's own memory is tested in test_dgc.py


def update(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"conv": torch.randn(8, 3, 3, 3, generator=g), "fc": torch.randn(40, 30, generator=g),
            "bias": torch.randn(10, generator=g)}


def run(name: str, upd: dict, seed: int = 0, memory=None, **config):
    cfg = CompressionConfig(name=name, **{"density": 0.05, **config})
    compressor, fresh = build_compression(cfg)
    memory = memory or fresh
    ctx = CompressionContext(density=cfg.density, generator=torch.Generator().manual_seed(seed), memory=memory)
    return compress_update(upd, compressor, memory, ctx, dense_small_tensors=cfg.dense_small_tensors,
                           value_dtype=cfg.value_dtype), memory, compressor


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value_dtype", ["fp32", "fp16"])
def test_round_trip_keeps_shape_and_gives_fp32(name, value_dtype):
    upd = update()
    out, _, compressor = run(name, upd, value_dtype=value_dtype, dense_small_tensors=False)
    for key, tensor in upd.items():
        dense = compressor.decompress(out.payloads[key])
        assert dense.shape == tensor.shape and dense.dtype == torch.float32
        assert torch.equal(dense, out.sent[key])
        assert torch.isfinite(dense).all()


def test_every_documented_compressor_is_registered():
    assert set(NAMES) == {"none", "fp16", "topk", "randomk", "threshold", "dgc", "signsgd", "efsignsgd", "signum",
                          "onebit", "qsgd", "terngrad", "natural", "powersgd", "stc"}


@pytest.mark.parametrize("name", ["qsgd", "terngrad", "randomk", "natural"])
def test_unbiased_methods_average_to_the_input(name):
    x = torch.randn(6, 50, generator=torch.Generator().manual_seed(1)) * torch.logspace(-3, 1, 50)
    draws = 2000
    total = torch.zeros_like(x)
    for seed in range(draws):
        out, _, _ = run(name, {"x": x}, seed=seed, error_feedback=False, density=0.25,
                        qsgd={"qsgd_levels": 3})
        total += out.sent["x"]
    mean = total / draws
    # Each entry's estimator has bounded variance; the tolerance is ~5 standard errors of the worst entry.
    scale = {"qsgd": x.norm(), "terngrad": x.abs().max(), "randomk": 2 * x.abs(), "natural": x.abs()}[name]
    assert ((mean - x).abs() <= 5 * scale / math.sqrt(draws) + 1e-6).all()
    # and a deterministic method is not "unbiased" by accident of the tolerance:
    assert not torch.equal(out.sent["x"], x)


@pytest.mark.parametrize("name", BASELINES)
def test_error_feedback_invariant(name):
    """sent + new residual == input + old residual (for signum, input = its momentum)."""
    _, memory, _ = run(name, update(0), dense_small_tensors=False)
    old = {k: v.clone() for k, v in memory.state_dict().items()}
    momenta_before = {k: v for k, v in old.items() if k.startswith("signum_momentum/")}
    second, memory, _ = run(name, update(1), seed=1, memory=memory, dense_small_tensors=False)
    new = memory.state_dict()
    for key, grad in update(1).items():
        if name == "signum":
            grad = 0.9 * momenta_before["signum_momentum/" + key] + 0.1 * grad
        compensated = grad + old.get("residual/" + key, torch.zeros_like(grad))
        assert torch.allclose(second.sent[key] + new["residual/" + key], compensated, atol=1e-6)
    if name != "none":  # lossless: nothing to carry
        assert any(not torch.equal(v, torch.zeros_like(v)) for k, v in new.items() if k.startswith("residual/"))


@pytest.mark.parametrize("name", BASELINES)
def test_without_error_feedback_nothing_is_kept(name):
    _, memory, _ = run(name, update(), error_feedback=False)
    assert not [k for k in memory.state_dict() if k.startswith("residual/")]
    if name not in ("signum", "powersgd"):
        assert isinstance(memory, NoMemory)


def test_signum_momentum_and_powersgd_q_survive_the_state_dict():
    _, memory, _ = run("signum", update(0))
    assert {"signum_momentum/fc", "signum_momentum/conv"} <= set(memory.state_dict())
    _, memory, _ = run("powersgd", update(0), powersgd_rank=2)
    state = memory.state_dict()
    assert state["powersgd_q/fc"].shape == (30, 2)
    restored = type(memory)(error_feedback=True)
    restored.load_state_dict(state)
    assert torch.equal(restored.qs["fc"], state["powersgd_q/fc"])


def test_powersgd_warm_start_converges_to_the_best_rank_r_approximation():
    m = torch.randn(40, 30, generator=torch.Generator().manual_seed(3))
    best = torch.linalg.svdvals(m)[2:].pow(2).sum().sqrt()  # error of the optimal rank-2 approximation
    memory = None
    errors = []
    for step in range(30):
        out, memory, _ = run("powersgd", {"fc": m}, seed=step, memory=memory, error_feedback=False)
        errors.append(float((out.sent["fc"] - m).norm()))
    assert errors[-1] < errors[0] and errors[-1] == pytest.approx(float(best), rel=0.02)


SIZES = {  # exact bytes of one payload body for n elements (besides the kind byte)
    "none": lambda n: 1 + 4 * n,
    "fp16": lambda n: 1 + 2 * n,
    "signsgd": lambda n: 4 + math.ceil(n / 8),
    "signum": lambda n: 4 + math.ceil(n / 8),
    "efsignsgd": lambda n: 8 + math.ceil(n / 8),
    "onebit": lambda n: 8 + math.ceil(n / 8),
    "terngrad": lambda n: 4 + math.ceil(n / 5),
    "natural": lambda n: n + math.ceil(n / 8),
    "qsgd": lambda n: 1 + 2 + 4 * math.ceil(n / 512) + math.ceil(n * 5 / 8),  # varints s=15 (1 B), d=512 (2 B)
}


@pytest.mark.parametrize("name", list(SIZES))
@pytest.mark.parametrize("n", [1, 7, 8, 9, 1000, 1001])
def test_packing_sizes_are_exact(name, n):
    out, _, _ = run(name, {"x": torch.randn(n, 1)}, dense_small_tensors=False)
    assert len(encode_bytes(out.payloads)) == 1 + 1 + SIZES[name](n)  # version byte, kind byte, body


def test_sign_payloads_cost_one_bit_per_element():
    out, _, _ = run("signsgd", {"x": torch.randn(800, 10)})
    assert out.payloads["x"].signs.numel() == 1000  # 8000 signs in 1000 bytes, not 8000 uint8


@pytest.mark.parametrize("n", [0, 1, 5, 13, 64])
def test_bit_trit_and_uint_packing_round_trip_and_reject_bad_padding(n):
    g = torch.Generator().manual_seed(n)
    flags = torch.rand(n, generator=g) < 0.5
    assert torch.equal(unpack_bits(pack_bits(flags), n), flags)
    trits = torch.randint(3, (n,), generator=g)
    assert torch.equal(unpack_trits(pack_trits(trits), n), trits)
    codes = torch.randint(31, (n,), generator=g)
    assert torch.equal(unpack_uint(pack_uint(codes, 5), n, 5), codes)
    if n % 8:
        bad = pack_bits(flags).clone()
        bad[-1] |= 0x80
        with pytest.raises(PackingError):
            unpack_bits(bad, n)
    if n % 5:
        with pytest.raises(PackingError):
            unpack_trits(torch.tensor([242] * math.ceil(n / 5), dtype=torch.uint8), n)


def test_majority_vote_is_the_sign_of_the_weighted_vote_times_the_mean_scale():
    x = torch.tensor([[1.0, -1.0, 2.0, -2.0]])
    y = torch.tensor([[1.0, 1.0, -2.0, -2.0]])
    z = torch.tensor([[-1.0, 1.0, -3.0, 2.0]])
    payloads = [run("signsgd", {"w": t})[0].payloads for t in (x, y, z)]
    assert all(isinstance(p["w"], VotePayload) for p in payloads)
    result = aggregate_payloads([(0.5, payloads[0]), (0.25, payloads[1]), (0.25, payloads[2])], {"w": (1, 4)})
    mean_scale = 0.5 * 1.5 + 0.25 * 1.5 + 0.25 * 1.75
    assert torch.allclose(result["w"], torch.tensor([[1.0, 0.0, 0.0, -1.0]]) * mean_scale)


def test_low_rank_factors_are_summed_in_factored_form_exactly():
    a, b = torch.randn(40, 30), torch.randn(40, 30)
    pa, pb = run("powersgd", {"w": a})[0], run("powersgd", {"w": b}, seed=1)[0]
    assert isinstance(pa.payloads["w"], LowRankPayload)
    result = aggregate_payloads([(0.3, pa.payloads), (0.7, pb.payloads)], {"w": (40, 30)})
    assert torch.allclose(result["w"], 0.3 * pa.sent["w"] + 0.7 * pb.sent["w"], atol=1e-5)


@pytest.mark.parametrize("name", ["qsgd", "terngrad", "natural", "stc", "onebit", "efsignsgd", "fp16"])
def test_other_payloads_are_decoded_and_averaged(name):
    ua, ub = update(0), update(1)
    pa, pb = run(name, ua)[0], run(name, ub, seed=1)[0]
    shapes = {k: tuple(v.shape) for k, v in ua.items()}
    result = aggregate_payloads([(0.25, pa.payloads), (0.75, pb.payloads)], shapes)
    for key in shapes:
        assert torch.allclose(result[key], 0.25 * pa.sent[key] + 0.75 * pb.sent[key], atol=1e-6)


@pytest.mark.parametrize("name", ["none", "topk", "threshold", "dgc", "powersgd", "fp16"])
def test_fp16_values_saturate_at_65504_and_the_residual_keeps_the_excess(name):
    """fp16 overflowed to ±Inf on main, and the server rejected the whole honest reply."""
    from fedgc.wire.codec import decode_bytes

    g = torch.Generator().manual_seed(0)
    upd = {"fc": torch.randn(40, 30, generator=g), "bias": torch.randn(10, generator=g)}
    upd["fc"][0, :4] = torch.tensor([1e5, -2e5, 7e4, -65600.0])  # beyond fp16's ±65504 …
    upd["fc"][1, :] *= 5e4  # … a whole row of the rank-r factors too
    upd["bias"][:2] = torch.tensor([3e5, -3e5])
    out, memory, _ = run(name, upd, value_dtype="fp16", density=0.5, threshold={"threshold": 0.5},
                              dense_small_tensors=True)
    decoded = decode_bytes(encode_bytes(out.payloads), {k: tuple(v.shape) for k, v in upd.items()})  # no non-finite
    for key, grad in upd.items():
        dense = decoded[key].to_dense()
        assert torch.isfinite(dense).all() and torch.equal(dense, out.sent[key])
        if name in ("none", "topk", "threshold"):  # the entries beyond ±65504 are sent saturated
            assert dense.abs().max() == 65504.0
        residuals = {k.split("/", 1)[1]: v for k, v in memory.state_dict().items()
                     if k.startswith(("residual/", "dgc_velocity/"))}
        if name != "fp16":  # every method with a memory: sent + residual == what was to be sent
            assert torch.allclose(out.sent[key] + residuals[key], grad, rtol=0, atol=0.05)


@pytest.mark.parametrize("name", ["topk", "stc", "dgc"])
def test_top_k_takes_the_lowest_indices_among_equal_magnitudes(name):
    """Ties at the k-th magnitude go to the lowest indices (the rule a client in any language
    reproduces); larger entries are always in, NaN above every number."""
    flat = torch.tensor([0.5, -2.0, 1.0, -1.0, 3.0, 1.0, float("nan"), -1.0, 0.25, 1.0] * 200)
    payload = build_compression(CompressionConfig(name=name, density=0.375, dgc={"sample_ratio": 1.0}))[0].compress(
        flat, "w", CompressionContext(density=0.375, generator=torch.Generator().manual_seed(0)))
    k = 750  # 0.375 · 2000: the 200 NaN, 200 × 3.0, 200 × -2.0, then 150 of the 1,000 entries of magnitude 1
    larger = [i for i in range(2000) if i % 10 in (1, 4, 6)]
    tied = [i for i in range(2000) if i % 10 in (2, 3, 5, 7, 9)][:150]
    assert payload.indices.tolist() == sorted(larger + tied) and len(larger + tied) == k


def test_top_k_of_a_tensor_without_ties_is_torch_topk():
    flat = torch.randn(10_000, generator=torch.Generator().manual_seed(3))
    expected = torch.topk(flat.abs(), 77).indices.sort().values
    assert torch.equal(topk_indices(flat, 77), expected)
