"""Local training and central evaluation with plain PyTorch (no Flower imports here)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from fedgc.data.base import ArrayDataset


@dataclass
class LocalTrainResult:
    steps: int
    samples: int  # samples processed (what the device's compute time is charged for)
    mean_loss: float


def train_local(model: nn.Module, data: ArrayDataset, *, steps: int, batch_size: int, lr: float,
                generator: torch.Generator, momentum: float = 0.0, weight_decay: float = 0.0,
                grad_clip_norm: float | None = None) -> LocalTrainResult:
    """Run ``steps`` SGD steps on minibatches drawn by reshuffling ``data`` each pass, on the model's
    device (the batch order is drawn on the CPU, so it is the same on every device)."""
    device = next(model.parameters()).device
    model.train()
    x, y = data.tensors(device)  # on a GPU copied there once per process, not per round
    n = len(data)
    params = list(model.parameters())
    buffers: list[torch.Tensor | None] = [None] * len(params)  # momentum, made at the first step
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(n, generator=generator)
    cursor, samples, losses = 0, 0, []
    for _ in range(steps):
        if cursor >= n:
            order, cursor = torch.randperm(n, generator=generator), 0
        batch = order[cursor:cursor + batch_size]
        cursor += batch_size
        for p in params:
            p.grad = None
        index = batch.to(device)
        loss = loss_fn(model(x[index]), y[index])
        loss.backward()
        if grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(params, grad_clip_norm)
        sgd_step(params, buffers, lr=lr, momentum=momentum, weight_decay=weight_decay)
        samples += int(batch.numel())
        losses.append(loss.detach())  # read once at the end: no device synchronisation per step
    # Summed in Python floats in step order, as a running ``loss_sum += float(loss)`` would.
    loss_sum = sum(float(v) for v in torch.stack(losses).cpu()) if losses else 0.0
    return LocalTrainResult(steps=steps, samples=samples, mean_loss=loss_sum / max(1, steps))


@torch.no_grad()
def sgd_step(params: list[nn.Parameter], buffers: list[torch.Tensor | None], *, lr: float, momentum: float,
             weight_decay: float) -> None:
    """One step of SGD with momentum and weight decay, the arithmetic of ``torch.optim.SGD`` (its
    single-tensor update, the one it runs on the CPU: equal bit for bit there, tests/test_training_sgd.py)
    without the optimizer class, whose first use imports TorchDynamo: 1.3–1.5 s of CPU in every process
    that trains, and a Flower ClientApp is a new process per message. ``buffers``: the momentum
    buffers, one per parameter (``None`` until its first step), updated in place."""
    for i, p in enumerate(params):
        if p.grad is None:
            continue
        grad = p.grad if weight_decay == 0 else p.grad.add(p, alpha=weight_decay)
        if momentum != 0:
            buffer = buffers[i]
            if buffer is None:
                buffer = buffers[i] = grad.detach().clone()
            else:
                buffer.mul_(momentum).add_(grad)  # torch's alpha is 1 - dampening, and dampening is 0
            grad = buffer
        p.add_(grad, alpha=-lr)


def samples_asked(scenario: Any, data: Any) -> int:
    """The most samples a train message asks any client to train on in a round (``scenario``: a
    Scenario, ``data``: its FederatedData): local steps × batch size, or epochs over the largest
    partition (each step draws at most one batch; the last may be partial)."""
    c = scenario.client
    if c.local_steps is not None:
        return int(c.local_steps * c.batch_size)
    return int(math.ceil(c.epochs * max((len(p) for p in data.partitions), default=0)) + c.batch_size)


def steps_for_epochs(num_samples: int, batch_size: int, epochs: float) -> int:
    return max(1, int(np.ceil(epochs * num_samples / batch_size)))


@torch.no_grad()
def evaluate(model: nn.Module, data: ArrayDataset, batch_size: int = 1024) -> tuple[float, float]:
    """(accuracy, mean cross-entropy loss) on ``data``, on the model's device."""
    model.eval()
    device = next(model.parameters()).device
    x, y = data.tensors(device)  # on a GPU copied there once per process, not per evaluation
    correct, loss_sum = 0, 0.0
    for start in range(0, len(data), batch_size):
        logits = model(x[start:start + batch_size])
        target = y[start:start + batch_size]
        loss_sum += float(nn.functional.cross_entropy(logits, target, reduction="sum"))
        correct += int((logits.argmax(1) == target).sum())
    return correct / max(1, len(data)), loss_sum / max(1, len(data))
