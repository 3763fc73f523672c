"""DGC (Lin et al., 2018) against a dense reference implementation of the paper's equations."""

from __future__ import annotations

import math

import pytest
import torch

from fedgc.compress import make_compressor
from fedgc.compress.base import CompressionContext, decompress
from fedgc.compress.config import CompressionConfig
from fedgc.compress.dgc import DGC, sampled_topk_indices
from fedgc.compress.dgc_memory import DGCMemory
from fedgc.compress.randomness import generator_on
from fedgc.compress.update import build_compression, compress_update
from fedgc.compress.warmup import warmup_density

SHAPES = {"conv.weight": (6, 4, 3, 3), "fc.weight": (10, 12), "fc.bias": (10,)}


def random_update(gen: torch.Generator, scale: float = 1.0) -> dict[str, torch.Tensor]:
    return {name: scale * torch.randn(shape, generator=gen) for name, shape in SHAPES.items()}


def torch_clip(tensors: list[torch.Tensor], max_norm: float) -> list[torch.Tensor]:
    """torch.nn.utils.clip_grad_norm_ applied to copies of ``tensors`` (it clips parameters' grads)."""
    params = [torch.nn.Parameter(torch.zeros_like(t)) for t in tensors]
    for p, t in zip(params, tensors):
        p.grad = t.clone()
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    return [p.grad for p in params]


def reference_step(state, grads, *, m, nesterov, correction, masking, density, clip_norm=None, num_clients=1):
    """The paper's algorithm written out densely; exact top-k by sorting; returns sent and masks."""
    if clip_norm is not None:
        grads = dict(zip(grads, torch_clip(list(grads.values()), clip_norm / math.sqrt(num_clients))))
    sent, masks = {}, {}
    for name, g in grads.items():
        u, v = state.setdefault(name, (torch.zeros_like(g), torch.zeros_like(g)))
        if not correction:
            v = v + g
        elif nesterov:
            u = m * (u + g)
            v = v + u + g
        else:
            u = m * u + g
            v = v + u
        if g.dim() <= 1:  # sent dense, ordinary momentum
            mask = torch.ones_like(g, dtype=torch.bool)
        else:
            k = math.ceil(density * g.numel())
            order = torch.argsort(v.abs().flatten(), descending=True)[:k]
            mask = torch.zeros(g.numel(), dtype=torch.bool)
            mask[order] = True
            mask = mask.view_as(g)
        sent[name] = torch.where(mask, v, torch.zeros_like(v))
        masks[name] = mask
        v = torch.where(mask, torch.zeros_like(v), v)
        if correction and masking and g.dim() > 1:
            u = torch.where(mask, torch.zeros_like(u), u)
        state[name] = (u, v)
    return sent, masks


@pytest.mark.parametrize(
    "nesterov, correction, masking, clip_norm",
    [
        (False, True, True, None),
        (False, True, False, None),
        (True, True, True, None),
        (True, True, False, None),
        (False, False, True, None),
        (False, True, True, 2.0),
    ],
)
def test_matches_dense_reference_step_by_step(nesterov, correction, masking, clip_norm):
    config = CompressionConfig(
        name="dgc",
        density=0.05,
        momentum=0.9,
        nesterov=nesterov,
        momentum_correction=correction,
        momentum_masking=masking,
        clip_norm=clip_norm,
        sample_ratio=1.0,
    )
    compressor, memory = build_compression(config)
    gen = torch.Generator().manual_seed(0)
    reference: dict = {}
    for round_ in range(1, 7):
        grads = random_update(gen)
        ctx = CompressionContext(
            round=round_, density=0.05, generator=torch.Generator().manual_seed(round_), num_clients=4
        )
        result = compress_update(grads, compressor, memory, ctx)
        ref_sent, ref_masks = reference_step(
            reference,
            grads,
            m=0.9,
            nesterov=nesterov,
            correction=correction,
            masking=masking,
            density=0.05,
            clip_norm=clip_norm,
            num_clients=4,
        )
        for name in SHAPES:
            u, v = reference[name]
            assert torch.equal(result.sent[name], ref_sent[name]), name
            assert torch.equal(result.sent[name] != 0, ref_masks[name]), name
            assert torch.equal(memory.velocities[name], v), name
            if correction:
                assert torch.equal(memory.momentums[name], u), name


def test_sent_plus_residual_is_the_accumulated_input():
    dgc = DGC(sample_ratio=0.01)
    memory = DGCMemory(momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    total_sent = torch.zeros(300, 400)
    total_momentum = torch.zeros(300, 400)
    for round_ in range(1, 6):
        g = torch.randn(300, 400, generator=gen)
        v = memory.compensate(g, "w")
        total_momentum += memory.momentums["w"]
        sent = decompress(dgc.compress(v, "w", CompressionContext(round=round_, density=0.01, generator=gen)))
        memory.update("w", v, sent)
        assert torch.equal(memory.velocities["w"] + sent, v)
        total_sent += sent
    # Telescoping: everything accumulated into v was either sent or is still in the residual.
    torch.testing.assert_close(total_sent + memory.velocities["w"], total_momentum)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_sampled_threshold_density_within_20_percent(seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1000, 1000, generator=gen)
    payload = DGC(sample_ratio=0.01).compress(x, "w", CompressionContext(density=0.001, generator=gen))
    k = 1000
    assert 0.8 * k <= payload.indices.numel() <= 1.2 * k
    # Whatever was selected dominates whatever was left out.
    left_out = x.flatten().abs().clone()
    left_out[payload.indices] = 0
    assert payload.values.abs().min() >= left_out.max()


def test_exact_selection_sends_exactly_k_largest():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(300, 300, generator=gen)
    payload = DGC(sample_ratio=1.0).compress(x, "w", CompressionContext(density=0.01, generator=gen))
    expected = torch.topk(x.flatten().abs(), 900).indices.sort().values
    assert torch.equal(payload.indices, expected)


def test_indices_sorted_int64_and_deterministic():
    x = torch.randn(2000, 600, generator=torch.Generator().manual_seed(6))
    runs = [sampled_topk_indices(x.flatten(), 1200, 0.005, torch.Generator().manual_seed(7))[0] for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
    assert runs[0].dtype == torch.int64
    assert bool((runs[0][1:] > runs[0][:-1]).all())


@pytest.mark.parametrize("case", ["normal", "lowered", "mostly-zero", "fp16"])
def test_the_device_threshold_selects_what_the_host_threshold_selects(case):
    """The GPU's way (the threshold kept as a device tensor, never read back) picks the same entries
    in the same number of passes as the CPU's (a Python float), run here on the CPU."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(400_000, generator=gen)
    if case == "mostly-zero":  # fewer nonzero entries than k: a threshold of 0 means "nonzero"
        x = torch.where(torch.rand(x.shape, generator=gen) < 0.001, x, torch.zeros(()))
    if case == "fp16":
        x = x.half()
    seed = 11 if case == "lowered" else 3  # with seed 11 the sample's threshold is too high: one lowering
    host = sampled_topk_indices(x, 2_000, 0.01, torch.Generator().manual_seed(seed))
    device = sampled_topk_indices(x, 2_000, 0.01, torch.Generator().manual_seed(seed), device_threshold=True)
    assert torch.equal(host[0], device[0]) and host[1] == device[1]
    assert device[1] == (2 if case == "lowered" else 1)
    if case == "mostly-zero":
        assert torch.equal(device[0], x.nonzero().view(-1))


def test_the_sample_is_drawn_where_the_tensor_is():
    """On the tensor's device the client's own generator draws the positions (the CPU's stream is
    today's); elsewhere a generator on that device, seeded by one draw of the client's."""
    own = torch.Generator().manual_seed(5)
    assert generator_on(own, torch.device("cpu")) is own
    if torch.cuda.is_available():
        before = own.get_state()
        there = generator_on(own, torch.device("cuda", 0))
        assert there.device.type == "cuda" and not torch.equal(own.get_state(), before)


def test_zeros_are_never_sent():
    x = torch.zeros(500, 500)
    x[3, 7], x[100, 200] = 1.5, -2.0
    payload = DGC(sample_ratio=0.01).compress(x, "w", CompressionContext(density=0.01))
    assert payload.indices.tolist() == [3 * 500 + 7, 100 * 500 + 200]


def test_warmup_densities_follow_the_paper():
    paper = [0.25, 0.0625, 0.015625, 0.004, 0.001]
    assert [warmup_density(r, 5, 0.001) for r in range(1, 8)] == [*paper, 0.001, 0.001]
    assert [warmup_density(r, 10, 0.001) for r in range(1, 11)] == [d for d in paper for _ in range(2)]
    assert [warmup_density(r, 5, 0.01) for r in range(1, 7)] == [0.25, 0.0625, 0.015625, 0.01, 0.01, 0.01]
    assert warmup_density(1, 0, 0.001) == 0.001


@pytest.mark.parametrize("nesterov", [False, True])
def test_density_one_without_masking_is_momentum_sgd(nesterov):
    gen = torch.Generator().manual_seed(8)
    a, b = torch.randn(20, 6, generator=gen), torch.randn(20, generator=gen)
    weights = {"w": torch.randn(6, 5, generator=gen), "bias": torch.randn(5, generator=gen)}

    def grads(w: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w, bias = w.detach().requires_grad_(), bias.detach().requires_grad_()
        ((a @ w + bias).sum(dim=1) - b).pow(2).mean().backward()
        return w.grad, bias.grad

    lr, m = 0.05, 0.9
    params = [weights["w"].clone().requires_grad_(), weights["bias"].clone().requires_grad_()]
    sgd = torch.optim.SGD(params, lr=lr, momentum=m, nesterov=nesterov)
    config = CompressionConfig(name="dgc", density=1.0, momentum=m, nesterov=nesterov, momentum_masking=False)
    compressor, memory = build_compression(config)
    for round_ in range(1, 9):
        sgd.zero_grad()
        params[0].grad, params[1].grad = grads(*params)
        sgd.step()
        gw, gb = grads(weights["w"], weights["bias"])
        # Data-parallel mode: the pseudo-gradient of one plain SGD step is lr·∇; the server subtracts.
        update = {"w": lr * gw, "bias": lr * gb}
        result = compress_update(update, compressor, memory, CompressionContext(round=round_, density=1.0))
        weights = {name: weights[name] - result.sent[name] for name in weights}
        torch.testing.assert_close(weights["w"], params[0].detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(weights["bias"], params[1].detach(), rtol=1e-5, atol=1e-6)


def test_clipping_threshold_scales_with_inverse_sqrt_clients():
    update = random_update(torch.Generator().manual_seed(9), scale=10.0)
    dgc = DGC(clip_norm=1.0)
    for n in (1, 4, 16):
        clipped = dgc.prepare_update(update, CompressionContext(num_clients=n))
        norm = torch.linalg.vector_norm(torch.cat([t.flatten() for t in clipped.values()]))
        assert norm.item() == pytest.approx(1.0 / math.sqrt(n), rel=1e-4)
        for got, want in zip(clipped.values(), torch_clip(list(update.values()), 1.0 / math.sqrt(n))):
            torch.testing.assert_close(got, want)
    small = {k: t / 1000 for k, t in update.items()}
    assert all(
        torch.equal(small[k], t) for k, t in dgc.prepare_update(small, CompressionContext(num_clients=4)).items()
    )
    assert DGC(clip_norm=None).prepare_update(update, CompressionContext()) is update


def test_restore_puts_an_unapplied_update_back():
    config = CompressionConfig(name="dgc", density=0.05, sample_ratio=1.0)
    compressor, memory = build_compression(config)
    gen = torch.Generator().manual_seed(10)
    compress_update(random_update(gen), compressor, memory, CompressionContext(round=1, density=0.05))
    before = {name: v.clone() for name, v in memory.velocities.items()}
    momentum_before = {name: u.clone() for name, u in memory.momentums.items()}
    grads = random_update(gen)
    result = compress_update(grads, compressor, memory, CompressionContext(round=2, density=0.05))
    for name, sent in result.sent.items():  # the upload was lost: nothing of it may be lost
        memory.restore(name, sent)
    for name, g in grads.items():
        accumulated = before[name] + (0.9 * momentum_before[name] + g)
        torch.testing.assert_close(memory.velocities[name], accumulated, rtol=0, atol=1e-6)


def test_state_dict_round_trip_continues_identically():
    config = CompressionConfig(name="dgc", density=0.02, nesterov=True, clip_norm=5.0)
    compressor, memory = build_compression(config)
    gen = torch.Generator().manual_seed(11)
    for round_ in range(1, 3):
        compress_update(random_update(gen), compressor, memory, CompressionContext(round=round_, density=0.02))
    state = memory.state_dict()
    assert all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items())
    restored = type(memory)(momentum=0.9, nesterov=True)
    restored.load_state_dict({k: v.clone() for k, v in state.items()})
    for round_ in range(3, 6):
        grads = random_update(gen)
        outs = [
            compress_update(
                grads,
                compressor,
                mem,
                CompressionContext(round=round_, density=0.02, generator=torch.Generator().manual_seed(round_)),
            )
            for mem in (memory, restored)
        ]
        for name in SHAPES:
            assert torch.equal(outs[0].sent[name], outs[1].sent[name])
    assert state.keys() == restored.state_dict().keys()


def test_registered_and_default():
    assert isinstance(make_compressor("dgc"), DGC)
    assert CompressionConfig().name == "dgc"
    compressor, memory = build_compression(CompressionConfig(clip_norm=1.0, sample_ratio=0.005))
    assert isinstance(memory, DGCMemory)
    assert (compressor.clip_norm, compressor.sample_ratio) == (1.0, 0.005)
