"""The reference executor: each client's local SGD one after another, today's semantics exactly.

Every client runs ``train_one`` (``fedgc.execution.training.train_local`` and its Δ), the function the Flower
client's ``local_update`` runs too, on the device the worker model was moved to.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from fedgc.execution.device import resolve_device
from fedgc.execution.jobs import TrainJob, TrainResult
from fedgc.execution.training import train_local


def run_sequential(model: nn.Module, start: Mapping[str, torch.Tensor], jobs: Sequence[TrainJob], *,
                   device: str | torch.device = "cpu", out_device: str | torch.device = "cpu") -> list[TrainResult]:
    """Train every job from ``start`` (or its own ``job.start``), one at a time; Δ per client on ``out_device``."""
    device = resolve_device(device)
    worker = copy.deepcopy(model).to(device)
    shared = {name: t.detach().to(device) for name, t in start.items()}
    return [train_one(worker, shared if job.start is None else job.start, job, out_device=out_device) for job in jobs]


def train_one(worker: nn.Module, start: Mapping[str, torch.Tensor], job: TrainJob, *,
              out_device: str | torch.device = "cpu") -> TrainResult:
    """One client's local SGD on ``worker`` (on its device) from ``start``; Δ = start − w_local on
    ``out_device``. The one sequential training path: ``run_sequential`` and the ClientApp both use it."""
    device = next(worker.parameters()).device
    start_on = {name: t.detach().to(device) for name, t in start.items()}
    worker.load_state_dict(start_on)
    summary = train_local(worker, job.data, steps=job.steps, batch_size=job.batch_size, lr=job.lr,
                          generator=job.generator, momentum=job.momentum, weight_decay=job.weight_decay,
                          grad_clip_norm=job.grad_clip_norm)
    delta = {name: (start_on[name] - t.detach()).to(out_device) for name, t in worker.state_dict().items()}
    return TrainResult(delta=delta, train=summary, num_examples=len(job.data))
