"""fedgc's local SGD step (``fedgc.execution.training.sgd_step``) is ``torch.optim.SGD``'s, bit for bit on the
CPU: the same parameters after every step, with and without momentum and weight decay, whatever the
model. It exists so that a process that trains need not import TorchDynamo (``torch.optim``'s first
use does)."""

from __future__ import annotations

import pytest
import torch

from fedgc.data.base import ArrayDataset
from fedgc.execution.training import sgd_step, train_local
from fedgc.models import build_model

from .conftest import modules_imported_by


def _grads(model, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.0, 1e-3), (0.9, 5e-4)])
@pytest.mark.parametrize("name, shape", [("mlp", (1, 8, 8)), ("small_cnn", (1, 8, 8))])
def test_each_step_equals_torch_optim_sgd(name, shape, momentum, weight_decay):
    ours, theirs = build_model(name, shape, 10, 0), build_model(name, shape, 10, 0)
    optimizer = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=momentum, weight_decay=weight_decay)
    params, buffers = list(ours.parameters()), [None] * len(list(ours.parameters()))
    data = torch.Generator().manual_seed(1)
    for _ in range(6):
        x, y = torch.randn(16, *shape, generator=data), torch.randint(0, 10, (16,), generator=data)
        for p in params:
            p.grad = None
        optimizer.zero_grad(set_to_none=True)
        _grads(ours, x, y)
        _grads(theirs, x, y)
        sgd_step(params, buffers, lr=0.1, momentum=momentum, weight_decay=weight_decay)
        optimizer.step()
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            assert torch.equal(a, b)


def test_a_parameter_without_a_gradient_is_left_alone():
    p, q = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    p.grad = torch.full((3,), 2.0)
    buffers = [None, None]
    sgd_step([p, q], buffers, lr=0.5, momentum=0.9, weight_decay=0.0)
    assert torch.equal(p.detach(), torch.zeros(3)) and torch.equal(q.detach(), torch.ones(3))
    assert buffers[1] is None and torch.equal(buffers[0], torch.full((3,), 2.0))


def test_local_training_does_not_import_torchdynamo():
    code = ("import torch\n"
            "from fedgc.data.base import ArrayDataset\n"
            "from fedgc.models import build_model\n"
            "from fedgc.execution.training import train_local\n"
            "data = ArrayDataset(torch.randn(64, 1, 8, 8).numpy(), torch.randint(0, 10, (64,)).numpy())\n"
            "train_local(build_model('mlp', (1, 8, 8), 10, 0), data, steps=3, batch_size=16, lr=0.1,\n"
            "            generator=torch.Generator().manual_seed(0), momentum=0.9, weight_decay=1e-4, grad_clip_norm=1.0)\n")
    assert modules_imported_by(code, ("torch._dynamo",)) == []


def test_train_local_is_unchanged_by_the_step_it_uses():
    """``train_local`` with momentum, weight decay and clipping gives the model ``torch.optim.SGD``
    would: the same loop written with the optimizer, step for step."""
    data = ArrayDataset(torch.randn(50, 1, 8, 8, generator=torch.Generator().manual_seed(3)).numpy(),
                        torch.randint(0, 10, (50,), generator=torch.Generator().manual_seed(4)).numpy())
    ours, theirs = build_model("mlp", (1, 8, 8), 10, 0), build_model("mlp", (1, 8, 8), 10, 0)
    result = train_local(ours, data, steps=7, batch_size=16, lr=0.05, generator=torch.Generator().manual_seed(5),
                         momentum=0.9, weight_decay=1e-4, grad_clip_norm=0.5)
    x, y = data.tensors(torch.device("cpu"))
    optimizer = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    generator, losses = torch.Generator().manual_seed(5), []
    order, cursor = torch.randperm(50, generator=generator), 0
    for _ in range(7):
        if cursor >= 50:
            order, cursor = torch.randperm(50, generator=generator), 0
        batch = order[cursor:cursor + 16]
        cursor += 16
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(theirs(x[batch]), y[batch])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
        optimizer.step()
        losses.append(float(loss.detach()))
    assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), theirs.parameters(), strict=True))
    assert result.mean_loss == sum(losses) / 7
