"""DGC's memory on the CPU writes a round's residual and masked momentum into the tensors it made
that round (``update_in_place``, what ``compress_update`` calls: no full-size ``v - sent`` or masked
copy of ``u``), and the server's SGD at lr 1 subtracts
without multiplying: the same bits as torch's plain arithmetic (NaNs included), and never a write
into a tensor someone else holds (a loaded or handed-out state)."""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fedgc.aggregation.server_optim import SGD
from fedgc.compress.dgc_memory import DGCMemory

_BITS = {torch.float32: torch.int32, torch.float64: torch.int64}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(_BITS[t.dtype]).clone()


def hostile(numel: int, seed: int) -> torch.Tensor:
    """Normal values with NaN, ±inf, -0.0, +0.0 and subnormals sprinkled in."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(numel, generator=gen)
    for value in (math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-42):
        x[torch.randint(numel, (max(1, numel // 200),), generator=gen)] = value
    return x


def sent_from(compensated: torch.Tensor, seed: int) -> torch.Tensor:
    """What a client sends: about 1% of the entries, fp16-rounded (so the residual keeps the rounding),
    a few of them a sent -0.0 or +0.0, and NaNs of other bits than the compensated NaN they replace
    (between two NaNs torch's subtraction keeps the second)."""
    gen = torch.Generator().manual_seed(seed)
    chosen = torch.rand(compensated.shape, generator=gen) < 0.01
    nan = torch.isnan(compensated)
    chosen |= nan & (torch.rand(compensated.shape, generator=gen) < 0.5)
    sent = torch.where(chosen, compensated.half().float(), 0.0)
    flat = sent.view(-1)
    picked = torch.nonzero((chosen & ~nan).view(-1)).view(-1)[:6]
    flat[picked[:3]], flat[picked[3:]] = -0.0, 0.0
    other = torch.tensor([0x7FC00002, -0x3FFFFE], dtype=torch.int32).view(torch.float32)  # two NaNs
    nans = torch.nonzero((chosen & nan).view(-1)).view(-1)
    flat[nans] = other[torch.arange(nans.numel()) % 2]
    assert nans.numel() >= 2
    return sent


def test_a_returning_client_settles_v_and_u_in_place_with_torchs_bits():
    """u and v loaded (a returning client), compensated, sent from: v becomes ``compensated - sent`` and u
    ``masked_fill(sent != 0, 0)`` in the very tensors compensate made, bit for bit; the loaded
    tensors keep every bit."""
    shape = (300, 257)  # more than one slice of the momentum step, an odd size
    u0, v0, grad = hostile(math.prod(shape), 1).view(shape), hostile(math.prod(shape), 2).view(shape), \
        hostile(math.prod(shape), 3).view(shape)
    loaded = {"dgc_momentum/w": u0.clone(), "dgc_velocity/w": v0.clone()}
    before = {k: bits(t) for k, t in loaded.items()}
    memory = DGCMemory(momentum=0.9)
    memory.load_state_dict(loaded)
    compensated = memory.compensate(grad, "w")
    expected_u = 0.9 * u0 + grad
    expected_v = v0 + expected_u
    assert torch.equal(bits(compensated), bits(expected_v))
    momentum = memory.momentums["w"]
    sent = sent_from(compensated, 4)
    memory.update_in_place("w", compensated, sent)
    assert memory.velocities["w"] is compensated and memory.momentums["w"] is momentum  # in place
    assert torch.equal(bits(memory.velocities["w"]), bits(expected_v - sent))
    assert torch.equal(bits(memory.momentums["w"]), bits(expected_u.masked_fill(sent != 0, 0.0)))
    assert all(torch.equal(bits(loaded[k]), before[k]) for k in loaded)


def test_update_keeps_compensated_and_a_subclass_keeps_its_own_update():
    """Plain ``update`` never writes into ``compensated``; a subclass that overrides ``update`` has it
    called by ``update_in_place``."""
    memory = DGCMemory(momentum=0.9)
    compensated = memory.compensate(hostile(5000, 9).view(50, 100), "w")
    held, sent = bits(compensated), sent_from(compensated, 10)
    memory.update("w", compensated, sent)
    assert torch.equal(bits(compensated), held) and memory.velocities["w"] is not compensated

    class Counting(DGCMemory):
        calls = 0

        def update(self, name: str, compensated: torch.Tensor, sent: torch.Tensor) -> None:
            Counting.calls += 1
            super().update(name, compensated, sent)

    counting = Counting(momentum=0.9)
    compensated = counting.compensate(hostile(5000, 11).view(50, 100), "w")
    held = bits(compensated)
    counting.update_in_place("w", compensated, sent_from(compensated, 12))
    assert Counting.calls == 1 and torch.equal(bits(compensated), held)


def test_a_handed_out_state_is_never_written_afterwards():
    """``state_dict`` between compensate and update hands u and v out: they are never written
    afterwards (new tensors instead); the next round's are the memory's own again."""
    memory = DGCMemory(momentum=0.9)
    compensated = memory.compensate(hostile(5000, 5).view(50, 100), "w")
    state = memory.state_dict()
    held = {k: bits(t) for k, t in state.items()}
    sent = sent_from(compensated, 6)
    memory.update_in_place("w", compensated, sent)
    assert all(torch.equal(bits(state[k]), held[k]) for k in state)
    assert memory.velocities["w"] is not compensated
    assert torch.equal(bits(memory.velocities["w"]), bits(compensated - sent))
    # The next round's tensors are the memory's own again: settled in place.
    again = memory.compensate(hostile(5000, 7).view(50, 100), "w")
    memory.update_in_place("w", again, sent_from(again, 8))
    assert memory.velocities["w"] is again


class Operators(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def test_sgd_at_lr_1_subtracts_the_aggregate_without_multiplying():
    """FedAvg (SGD, lr 1): w - delta, one subtraction a parameter, the bits of w - 1.0·delta."""
    weights = {"a": hostile(3000, 40).view(30, 100), "b": hostile(30, 41)}
    delta = {"a": hostile(3000, 42).view(30, 100), "b": hostile(30, 43)}
    with Operators() as ops:
        stepped = SGD(lr=1.0).step(weights, delta)
    assert ops.names == ["aten.sub.Tensor"] * 2
    assert all(torch.equal(bits(stepped[k]), bits(weights[k] - 1.0 * delta[k])) for k in weights)
    half = SGD(lr=0.5).step(weights, delta)
    assert all(torch.equal(bits(half[k]), bits(weights[k] - 0.5 * delta[k])) for k in weights)
