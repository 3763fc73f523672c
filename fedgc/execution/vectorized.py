"""Batched client execution: the clients of a round train together, one vmapped SGD step for all.

Every client keeps its own parameters, SGD momentum buffer, learning rate, momentum, weight decay,
gradient clipping, batch order (drawn from its generator exactly as ``train_local`` draws it) and
step count. A step gathers each client's minibatch into one (clients, batch, ...) tensor and takes
per-client gradients with ``torch.func`` (``functional_call`` + ``grad`` inside ``vmap``):

* an uneven batch (the end of a pass over a client's data) is padded to the largest batch with a
  real sample of that client and a per-sample mask; the loss is the masked sum over the real
  samples' count, so each client's loss and gradient are those of its unpadded batch;
* a client that has done its steps is masked: its parameters and momentum stay as they are.

Clients run in chunks of ``max_clients_per_chunk`` (on CUDA, by default sized from free memory by
``chunk_size_for_memory``; a chunk that runs out of memory is redone in halves). The deltas equal
``run_sequential``'s within float tolerance.

BatchNorm's running statistics are per client too: each client's buffers ride through the vmapped
step beside its parameters, updated in place by its own batches (a finished client's are put back).
A padded sample would enter a batch's statistics, so a BatchNorm model trains vectorized only when
every batch of every client is full and of one size. Models with other buffers, BatchNorm that
needs a padded batch, or layers vmap cannot batch train sequentially after a one-line notice.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.nn.utils.rnn import pad_sequence

from fedgc.execution.device import free_memory_bytes, resolve_device
from fedgc.execution.jobs import TrainJob, TrainResult
from fedgc.execution.sequential import run_sequential
from fedgc.execution.training import LocalTrainResult


def _stderr_notice(line: str) -> None:
    print(line, file=sys.stderr)


def batch_schedule(job: TrainJob) -> list[torch.Tensor]:
    """The client's minibatch indices, step by step, drawn from ``job.generator`` as ``train_local`` draws them."""
    n = len(job.data)
    order, cursor, batches = torch.randperm(n, generator=job.generator), 0, []
    for _ in range(job.steps):
        if cursor >= n:
            order, cursor = torch.randperm(n, generator=job.generator), 0
        batches.append(order[cursor:cursor + job.batch_size])
        cursor += job.batch_size
    return batches


def unsupported_reason(model: nn.Module) -> str | None:
    """Why ``model`` cannot train vectorized, or ``None`` when it can (as far as its structure tells)."""
    norms = {name for name, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)}
    others = [name for name, _ in model.named_buffers() if name.rpartition(".")[0] not in norms]
    if others:
        return f"the model has buffers other than BatchNorm's running statistics ({others[0]})"
    return None


def slow_on(model: nn.Module, device: torch.device) -> str | None:
    """Why vectorizing ``model`` on ``device`` would be slower than training the clients one by one, or
    None. On the CPU, PyTorch's fused recurrent kernels (``aten::mkldnn_rnn_layer``) have no vmap batching
    rule: vmap falls back to a per-sample loop, 5.4x slower per step than sequential training for the
    char_lstm (bench/lstm_round.py). (Not measured on CUDA.)"""
    if device.type == "cpu" and any(isinstance(m, nn.RNNBase) for m in model.modules()):
        return "recurrent layers on the CPU: PyTorch's fused RNN kernel has no vmap batching rule"
    return None


def _batch_widths(job: TrainJob) -> set[int]:
    """The sizes of the client's minibatches (``batch_schedule``'s, without drawing an order)."""
    n, size, widths, cursor = len(job.data), job.batch_size, set(), 0
    for _ in range(job.steps):
        if cursor >= n:
            cursor = 0
        widths.add(min(size, n - cursor))
        cursor += size
    return widths


def uneven_batches(model: nn.Module, jobs: Sequence[TrainJob]) -> str | None:
    """Why a BatchNorm model's batches cannot be stacked without padding, or ``None``."""
    if next(model.buffers(), None) is None:
        return None  # padding is masked out of the loss; only batch statistics would see it
    widths = set().union(*(_batch_widths(job) for job in jobs))
    if len(widths) > 1:
        return f"BatchNorm statistics need full batches of one size; these clients' batches have {sorted(widths)} examples"
    return None


def _grad_fn(model: nn.Module) -> Callable[..., tuple[dict[str, torch.Tensor], torch.Tensor]]:
    def loss_one(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                 mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # buffers (BatchNorm statistics) are updated in place
        per_sample = F.cross_entropy(functional_call(model, (params, buffers), (x,)), y, reduction="none")
        loss = (per_sample * mask).sum() / mask.sum().clamp_min(1.0)
        return loss, loss.detach()
    return vmap(grad(loss_one, has_aux=True))


def _probe(model: nn.Module, job: TrainJob, device: torch.device) -> str | None:
    """Try one vmapped gradient on two clients of (up to) two samples: ``None``, or why vmap cannot do it."""
    worker = copy.deepcopy(model).to(device).train()
    params = {n: p.detach().unsqueeze(0).repeat(2, *[1] * p.dim()) for n, p in worker.named_parameters()}
    buffers = {n: b.detach().unsqueeze(0).repeat(2, *[1] * b.dim()) for n, b in worker.named_buffers()}
    x = torch.from_numpy(job.data.x[:2]).to(device).unsqueeze(0).repeat(2, *[1] * job.data.x.ndim)
    y = torch.from_numpy(job.data.y[:2]).to(device).unsqueeze(0).repeat(2, 1)
    try:
        _grad_fn(worker)(params, buffers, x, y, torch.ones(2, y.shape[1], device=device))
    except Exception as err:  # noqa: BLE001 - any failure means: train this model sequentially
        return f"vmap cannot batch it: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return None


def chunk_size_for_memory(model: nn.Module, jobs: Sequence[TrainJob], device: torch.device,
                          fraction: float = 0.7) -> int | None:
    """How many clients fit in ``fraction`` of the device's free memory (``None`` off CUDA).

    Per client: parameters, gradients, momentum and the updated copy (4×), the activations of one
    batch (measured with forward hooks on one sample, × batch size, × 3 for what autograd keeps and
    the activation gradients) and the client's data.
    """
    free = free_memory_bytes(device)
    if free is None or not jobs:
        return None
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    sizes: list[int] = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: sizes.append(out.numel() * out.element_size())
                                     if isinstance(out, torch.Tensor) else None) for m in model.modules()]
    try:
        with torch.no_grad():
            copy.deepcopy(model).cpu()(torch.from_numpy(jobs[0].data.x[:1]))
    finally:
        for hook in hooks:
            hook.remove()
    batch = max(job.batch_size for job in jobs)
    data_bytes = max(job.data.x.nbytes + job.data.y.nbytes for job in jobs)
    per_client = 4 * param_bytes + 3 * batch * sum(sizes) + data_bytes
    return max(1, int(free * fraction // per_client))


def run_vectorized(model: nn.Module, start: Mapping[str, torch.Tensor], jobs: Sequence[TrainJob], *,
                   device: str | torch.device = "cpu", out_device: str | torch.device = "cpu",
                   max_clients_per_chunk: int | None = None,
                   notice: Callable[[str], None] = _stderr_notice) -> list[TrainResult]:
    """``run_sequential``'s results (within float tolerance), computed with all clients of a chunk at once."""
    device = resolve_device(device)
    if not jobs:
        return []
    reason = (unsupported_reason(model) or slow_on(model, device) or uneven_batches(model, jobs)
              or _probe(model, jobs[0], device))
    if reason is not None:
        notice(f"fedgc: vectorized client execution unavailable ({reason}); training the clients sequentially")
        return run_sequential(model, start, jobs, device=device, out_device=out_device)
    chunk = max_clients_per_chunk or chunk_size_for_memory(model, jobs, device) or len(jobs)
    worker = copy.deepcopy(model).to(device).train()  # as train_local: BatchNorm uses batch statistics
    results: list[TrainResult] = []
    while len(results) < len(jobs):
        part = jobs[len(results):len(results) + chunk]
        states = [job.generator.get_state() for job in part]
        try:
            results += _run_chunk(worker, start, part, device, torch.device(out_device))
        except torch.OutOfMemoryError:
            if chunk == 1:
                raise
            for job, state in zip(part, states):  # redo these clients from the same batch orders
                job.generator.set_state(state)
            chunk = max(1, chunk // 2)
            if device.type == "cuda":
                torch.cuda.empty_cache()
            notice(f"fedgc: out of device memory; vectorized chunks of {chunk} clients from now on")
    return results


def _per_client(values: list[float], device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device)


def _run_chunk(model: nn.Module, start: Mapping[str, torch.Tensor], jobs: Sequence[TrainJob],
               device: torch.device, out_device: torch.device) -> list[TrainResult]:
    clients, steps = len(jobs), max(job.steps for job in jobs)
    width = max(job.batch_size for job in jobs)
    schedules = [batch_schedule(job) for job in jobs]
    index = torch.zeros(steps, clients, width, dtype=torch.long)
    valid = torch.zeros(steps, clients, width, dtype=torch.bool)
    offset = 0
    for c, (job, batches) in enumerate(zip(jobs, schedules)):
        index[:, c] = offset  # padded slots and finished steps read the client's first sample, masked
        if batches:
            padded = pad_sequence(batches, batch_first=True, padding_value=-1)  # (steps_c, ≤ width)
            index[:len(batches), c, :padded.shape[1]] = padded.clamp_min(0) + offset
            valid[:len(batches), c, :padded.shape[1]] = padded >= 0
        offset += len(job.data)
    x_all = torch.cat([job.data.tensors(device)[0] for job in jobs])  # joined on the device: each
    y_all = torch.cat([job.data.tensors(device)[1] for job in jobs])  # partition crossed the bus once
    index, mask = index.to(device), valid.to(device=device, dtype=torch.float32)
    active_rows = [[t < job.steps for job in jobs] for t in range(steps)]
    active = torch.tensor(active_rows, device=device)

    names = [name for name, _ in model.named_parameters()]
    buffer_names = [name for name, _ in model.named_buffers()]
    if all(job.start is None for job in jobs):
        origin = {n: start[n].detach().to(device).unsqueeze(0) for n in names + buffer_names}  # broadcast
    else:
        origin = {n: torch.stack([(start if job.start is None else job.start)[n].detach().to(device) for job in jobs])
                  for n in names + buffer_names}
    params = {n: origin[n].expand(clients, *origin[n].shape[1:]).clone() for n in names}
    stats = {n: origin[n].expand(clients, *origin[n].shape[1:]).clone() for n in buffer_names}
    lr = _per_client([job.lr for job in jobs], device)
    momentum = _per_client([job.momentum for job in jobs], device)
    decay = _per_client([job.weight_decay for job in jobs], device)
    clip = [job.grad_clip_norm for job in jobs]
    use_momentum, use_decay = any(job.momentum for job in jobs), any(job.weight_decay for job in jobs)
    buffers = {n: torch.zeros_like(p) for n, p in params.items()} if use_momentum else {}
    grad_fn = _grad_fn(model)
    loss_sum = torch.zeros(clients, dtype=torch.float64, device=device)

    def shaped(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return v.view(clients, *[1] * (like.dim() - 1))

    for t in range(steps):
        everyone = all(active_rows[t])
        before = {} if everyone else {n: b.clone() for n, b in stats.items()}
        grads, loss = grad_fn(params, stats, x_all[index[t]], y_all[index[t]], mask[t])
        if any(c is not None for c in clip):
            grads = _clip(grads, clip, device)
        with torch.no_grad():
            for n, old in before.items():  # a finished client's statistics stay as they were
                stats[n] = torch.where(shaped(active[t], old), stats[n], old)
            for n in names:
                p, g = params[n], grads[n]
                if use_decay:
                    g = g + shaped(decay, p) * p
                if use_momentum:
                    g = shaped(momentum, p) * buffers[n] + g
                    buffers[n] = g if everyone else torch.where(shaped(active[t], p), g, buffers[n])
                new = p - shaped(lr, p) * g
                params[n] = new if everyone else torch.where(shaped(active[t], p), new, p)
            loss_sum += torch.where(active[t], loss.double(), 0.0)

    with torch.no_grad():
        deltas = {n: (origin[n] - params[n]).to(out_device) for n in names}
        deltas.update({n: (origin[n] - stats[n]).to(out_device) for n in buffer_names})
    losses, samples = loss_sum.cpu().tolist(), valid.sum(dim=(0, 2)).tolist()
    return [TrainResult(delta={n: deltas[n][c] for n in start if n in deltas},
                         train=LocalTrainResult(steps=job.steps, samples=int(samples[c]),
                                                mean_loss=losses[c] / max(1, job.steps)),
                         num_examples=len(job.data))
            for c, job in enumerate(jobs)]


def _clip(grads: dict[str, torch.Tensor], limits: list[float | None], device: torch.device) -> dict[str, torch.Tensor]:
    """``nn.utils.clip_grad_norm_`` per client (clients without a limit are left alone)."""
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], dim=1).norm(dim=1)
    limit = torch.tensor([float("inf") if v is None else v for v in limits], device=device)
    coef = (limit / (norms + 1e-6)).clamp(max=1.0)
    return {n: g * coef.view(-1, *[1] * (g.dim() - 1)) for n, g in grads.items()}
