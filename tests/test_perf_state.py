"""Client state in ``context.state``: stored compactly, losslessly, and only for clients that trained."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.app import Array

from fedgc.flower.state.client_state import STATE_INDICES, pack_state, unpack_state


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        ints = {8: torch.int64, 4: torch.int32, 2: torch.int16}[a.element_size()]
        return torch.equal(a.reshape(-1).view(ints), b.reshape(-1).view(ints))
    return torch.equal(a, b)


def test_pack_state_round_trips_every_bit():
    generator = torch.Generator().manual_seed(0)
    sparse = torch.zeros(40, 50)
    sparse.view(-1)[torch.randperm(2000, generator=generator)[:20]] = torch.randn(20, generator=generator)
    sparse.view(-1)[7] = -0.0  # a sent value that is negative zero must come back as -0.0
    sparse.view(-1)[11] = float("nan")
    tensors = {
        "3/layer.weight": sparse,
        "3/layer.bias": torch.randn(50, generator=generator),
        "dense": torch.randn(30, 30, generator=generator),
        "half": torch.zeros(500, dtype=torch.float16).index_fill_(0, torch.tensor([4, 9]), 1.5),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "all-zero": torch.zeros(300),
        "counts": torch.arange(10),
    }
    record = pack_state(tensors)
    back = unpack_state(record)
    assert list(back) == list(tensors)  # same names, same order
    for name, tensor in tensors.items():
        assert same_bits(back[name], tensor), name
    assert STATE_INDICES + "3/layer.weight" in record  # stored sparse
    assert STATE_INDICES + "all-zero" in record and STATE_INDICES + "half" in record
    assert "dense" in record and "3/layer.bias" in record  # stored as they are


def test_sparse_state_is_smaller_than_dense():
    tensor = torch.zeros(100_000)
    tensor[::100] = 1.0  # 1% nonzero, like a pending DGC update at density 0.01
    packed = pack_state({"w": tensor}).count_bytes()
    assert packed < 0.1 * tensor.numel() * 4


def test_reserved_names_are_refused():
    with pytest.raises(ValueError, match="reserved"):
        pack_state({STATE_INDICES + "x": torch.zeros(100)})


def test_unpack_nothing():
    assert unpack_state(None) == {}


def test_dgc_clients_keep_momentum_velocity_and_a_sparse_pending_update(tiny_scenario):

    from fedgc.flower.client.client_app import MEMORY_KEY, PENDING_KEY
    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.loop import run_rounds
    from fedgc.scenario.model import validate

    tiny_scenario["data"]["num_clients"] = 8
    tiny_scenario["rounds"] = 1
    tiny_scenario["strategy"]["fraction"] = 0.25
    tiny_scenario["compression"] = {"name": "dgc", "density": 0.02}
    scenario = validate(tiny_scenario)
    grid = InlineGrid.for_scenario(scenario)
    run_rounds(grid, scenario, None)

    trained = [c for c in grid.contexts.values() if len(c.state.array_records)]
    assert len(trained) == 2
    # Clients that were never selected hold nothing.
    assert all(not c.state.array_records for c in grid.contexts.values() if c not in trained)
    for context in trained:
        memory = unpack_state(context.state.array_records[MEMORY_KEY])
        pending = unpack_state(context.state.array_records[PENDING_KEY])
        params = sum(t.numel() for n, t in memory.items() if n.startswith("dgc_velocity/"))
        dense_bytes = 4 * params
        assert sum(t.numel() for t in pending.values()) == params  # the whole update comes back dense
        assert context.state.array_records[PENDING_KEY].count_bytes() < 0.25 * dense_bytes
        # momentum + velocity, fp32, nothing duplicated
        assert math.isclose(context.state.array_records[MEMORY_KEY].count_bytes(), 2 * dense_bytes, rel_tol=0.05)


@pytest.mark.parametrize("array", [
    np.arange(10, dtype=np.float32), np.array(3.0, dtype=np.float32), np.zeros((0, 3), np.float32),
    np.linspace(0, 1, 60).astype(np.float16).reshape(3, 4, 5), np.arange(7, dtype=np.int32),
    np.arange(12, dtype=np.int64).reshape(3, 4), np.arange(25.0).reshape(5, 5).T, np.array([], dtype=np.int32),
], ids=lambda a: f"{a.dtype}{a.shape}")
def test_state_arrays_are_the_bytes_flower_writes(array):
    from flwr.app import Array

    from fedgc.flower.state.client_state import _array, _tensor

    fast, flower = _array(array), Array(np.ascontiguousarray(array) if array.ndim else array)
    assert ((fast.data, fast.dtype, tuple(fast.shape), fast.stype)
            == (flower.data, flower.dtype, tuple(flower.shape), flower.stype))
    for stored in (fast, flower):
        back = _tensor(stored)
        assert back.shape == array.shape and np.array_equal(back.numpy(), array)
        assert back.numpy().flags.writeable


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_the_finite_check_of_a_restored_state_agrees_with_torch_for_every_float_and_layout(dtype):
    """``all_finite`` (the check of a restored memory or pending update, ``check_memory``) answers as
    ``torch.isfinite(t).all()`` for each float dtype, a NaN or infinity anywhere (a strided view
    included), the largest finite value, -0.0, an empty and a 0-d tensor, one that requires grad and
    a negated view."""
    from fedgc.flower.client_checks import all_finite

    base = torch.linspace(-3, 3, 2 * 3 * 50).to(dtype).reshape(2, 3, 50)
    finite = [base, base.transpose(0, 2), base[:, :, ::7], torch.zeros(0, 4, dtype=dtype), torch.tensor(-0.0, dtype=dtype),
              torch.full((9,), torch.finfo(dtype).max, dtype=dtype), base.clone().requires_grad_(), torch._neg_view(base)]
    hostile = []
    for value in (float("nan"), float("inf"), float("-inf")):
        for position in (0, 149, 299):
            bad = base.clone()
            bad.view(-1)[position] = value
            hostile += [bad, bad.transpose(0, 2), bad.clone().requires_grad_(), torch._neg_view(bad)]
        strided = base.clone()
        strided[1, 2, 49] = value
        hostile.append(strided[:, :, ::7])  # the last entry the view holds
    hostile.append(torch.tensor(float("nan"), dtype=dtype))
    for tensor in finite + hostile:
        assert all_finite(tensor) is bool(torch.isfinite(tensor).all()), tensor
    assert not any(all_finite(t) for t in hostile) and all(all_finite(t) for t in finite)


def reference_pack(tensors: dict[str, torch.Tensor]) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    """What ``pack_state`` stored before it counted in NumPy: torch's count_nonzero and nonzero."""
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}
    stored = {}
    for name, tensor in tensors.items():
        arrays = {name: tensor}
        if tensor.is_floating_point() and tensor.dtype != torch.bfloat16 and tensor.numel() >= 64:
            bits = tensor.reshape(-1).view(ints[tensor.element_size()])
            if 3 * int(torch.count_nonzero(bits)) * (tensor.element_size() + 4) < tensor.numel() * tensor.element_size():
                nonzero = bits.nonzero().view(-1)
                arrays = {"sparse-indices/" + name: nonzero.to(torch.int32), "sparse-values/" + name: tensor.reshape(-1)[nonzero],
                          "sparse-shape/" + name: torch.tensor(tensor.shape, dtype=torch.int64)}
        for key, value in arrays.items():
            array = Array(value.contiguous().numpy())
            stored[key] = (array.dtype, tuple(array.shape), array.data)
    return stored


def test_a_packed_state_is_byte_for_byte_what_torch_selected():
    """Sparse or dense, the same choice and the same bytes as torch's selection (the indices ascending,
    -0.0 and NaN payloads kept as nonzero, float16 and float64, exactly at the choice's boundary)."""
    generator = torch.Generator().manual_seed(3)
    tensors = {}
    for dtype in (torch.float16, torch.float32, torch.float64):
        for nonzero in (0, 1, 100, 166, 167, 600):  # 1000 entries: sparse below a sixth (fp32), dense above
            t = torch.zeros(1000, dtype=dtype)
            t[torch.randperm(1000, generator=generator)[:nonzero]] = torch.randn(nonzero, generator=generator).to(dtype)
            tensors[f"{dtype}/{nonzero}"] = t.reshape(10, 100)
    odd = torch.zeros(500)
    odd.view(torch.int32)[[3, 77, 499]] = torch.tensor([-2**31, 0x7FC00001, 1], dtype=torch.int32)  # -0.0, a NaN, a denormal
    tensors["odd bits"] = odd
    tensors["strided"] = torch.randn(40, 30, generator=generator).t()
    record = pack_state(tensors)
    assert {k: (a.dtype, tuple(a.shape), a.data) for k, a in record.items()} == reference_pack(tensors)
    back = unpack_state(record, max_elements=1200)
    assert all(same_bits(back[n], t) for n, t in tensors.items())


def test_unpacked_tensors_are_writable_and_do_not_touch_the_stored_record():
    """The client's memory updates its tensors in place: each unpacked tensor is its own memory, never
    a view of the record's bytes (a sparse tensor is rebuilt from them in place)."""
    sparse = torch.zeros(50, 40)
    sparse.view(-1)[[5, 900, 1999]] = torch.tensor([1.0, -2.0, 3.0])
    tensors = {"3/w": sparse, "dense": torch.randn(30, 30), "half": torch.ones(100, dtype=torch.bfloat16)}
    record = pack_state(tensors)
    before = {k: a.data for k, a in record.items()}
    for max_elements in (None, 2000):
        for tensor in unpack_state(record, max_elements).values():
            tensor.add_(1)  # raises on a read-only view of the record's bytes
    assert {k: a.data for k, a in record.items()} == before
    assert all(same_bits(unpack_state(record)[n], t) for n, t in tensors.items())
