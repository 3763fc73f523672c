"""The opt-in precision trade-off of DGC's stored state: momentum u in bfloat16 between rounds.

Default (fp32) state is unchanged bit for bit; with bfloat16 the velocity v stays exact (no update
mass is lost) and only u is rounded, by at most 2^-9 relative per round trip.
"""

from __future__ import annotations

import torch

from fedgc.compress.base import CompressionContext
from fedgc.compress.dgc import DGC
from fedgc.compress.dgc_memory import MOMENTUM_KEY, VELOCITY_KEY, DGCMemory
from fedgc.compress.update import compress_update
from fedgc.flower.state.client_state import pack_state, unpack_state

SHAPES = {"conv.weight": (8, 4, 3, 3), "fc.weight": (10, 64), "fc.bias": (10,)}


def grads(generator: torch.Generator) -> dict[str, torch.Tensor]:
    return {name: torch.randn(shape, generator=generator) * 1e-3 for name, shape in SHAPES.items()}


def one_round(memory: DGCMemory, state: dict, update: dict, round_: int):
    """What the ClientApp does: load the state, compress with error feedback, store the state."""
    memory.load_state_dict(unpack_state(pack_state(state)))
    velocity_before = {k: v.clone() for k, v in memory.velocities.items()}
    momentum_before = {k: u.clone() for k, u in memory.momentums.items()}
    ctx = CompressionContext(round=round_, density=0.05, generator=torch.Generator().manual_seed(round_))
    result = compress_update(update, DGC(), memory, ctx)
    return result, velocity_before, momentum_before, memory.state_dict()


def test_fp32_state_is_the_default_and_round_trips_exactly():
    memory = DGCMemory()
    assert memory.momentum_dtype == torch.float32
    gen = torch.Generator().manual_seed(0)
    state: dict = {}
    for round_ in range(1, 4):
        _, _, _, state = one_round(memory, state, grads(gen), round_)
        assert all(t.dtype == torch.float32 for t in state.values())
        kept = {k: t.clone() for k, t in state.items()}
        back = unpack_state(pack_state(state))
        assert all(torch.equal(back[k], kept[k]) for k in kept)


def test_bfloat16_momentum_loses_no_update_mass_and_stays_close():
    gen = torch.Generator().manual_seed(1)
    stream = [grads(gen) for _ in range(8)]
    exact, rounded = DGCMemory(), DGCMemory(momentum_dtype=torch.bfloat16)
    exact_state: dict = {}
    rounded_state: dict = {}
    for round_, update in enumerate(stream, start=1):
        _, _, _, exact_state = one_round(exact, exact_state, update, round_)
        result, v_before, u_before, rounded_state = one_round(rounded, rounded_state, update, round_)
        for name, g in update.items():
            key_u, key_v = MOMENTUM_KEY + name, VELOCITY_KEY + name
            assert rounded_state[key_u].dtype == torch.bfloat16
            assert rounded_state[key_v].dtype == torch.float32
            # Error feedback is exact: what was sent plus what v keeps == v before + the new momentum.
            u_new = 0.9 * u_before.get(name, torch.zeros_like(g)) + g
            compensated = v_before.get(name, torch.zeros_like(g)) + u_new
            torch.testing.assert_close(result.sent[name] + rounded_state[key_v], compensated, rtol=0, atol=0)
        # The stored momentum is the fp32 one rounded once (relative error <= 2^-9).
        for name in update:
            live = rounded.momentums[name]
            stored = rounded_state[MOMENTUM_KEY + name].to(torch.float32)
            assert torch.all((stored - live).abs() <= live.abs() * 2.0**-8)
    # After 8 rounds the two trajectories still agree closely.
    for key in exact_state:
        a, b = exact_state[key].to(torch.float32), rounded_state[key].to(torch.float32)
        assert float((a - b).norm()) <= 0.02 * float(a.norm()), key


def test_bfloat16_state_takes_six_bytes_per_parameter():
    gen = torch.Generator().manual_seed(2)
    memory = DGCMemory(momentum_dtype=torch.bfloat16)
    compress_update(grads(gen), DGC(), memory, CompressionContext(round=1, density=0.05))
    params = sum(torch.Size(s).numel() for s in SHAPES.values())
    packed = pack_state(memory.state_dict())
    # 2 B (u) + 4 B (v) per parameter, plus the numpy headers of six arrays
    assert 6 * params <= packed.count_bytes() < 6 * params + 6 * 256
    back = unpack_state(packed)
    assert back[MOMENTUM_KEY + "fc.weight"].dtype == torch.bfloat16
    assert torch.equal(back[MOMENTUM_KEY + "fc.weight"].view(torch.int16),
                       memory.state_dict()[MOMENTUM_KEY + "fc.weight"].view(torch.int16))


def test_the_scenario_key_selects_the_momentum_storage():
    from fedgc.compress.config import CompressionConfig
    from fedgc.compress.update import build_compression

    _, default = build_compression(CompressionConfig(name="dgc"))
    _, bf16 = build_compression(CompressionConfig(name="dgc", momentum_dtype="bf16"))
    assert default.momentum_dtype == torch.float32 and bf16.momentum_dtype == torch.bfloat16
