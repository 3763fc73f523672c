"""Device selection for the Flower-free core: ``auto | cpu | cuda | cuda:N`` → ``torch.device``."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from fedgc.errors import FedgcError

_SPEC = re.compile(r"^(auto|cpu|cuda)(?::(\d+))?$")
DEVICE_PATTERN = r"^(auto|cpu|cuda(:\d+)?)$"  # the scenario's ``device`` key


class DeviceError(FedgcError, ValueError):
    """The requested device does not exist on this machine (one-line message)."""


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """``auto`` is the first CUDA GPU when there is one, else the CPU; ``cuda``/``cuda:N`` must exist."""
    if isinstance(spec, torch.device):
        spec = str(spec)
    text = (spec or "auto").strip().lower()
    match = _SPEC.match(text)
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise DeviceError(f"device: {spec!r} is not one of auto, cpu, cuda, cuda:N")
    kind, index = match.group(1), match.group(2)
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "auto":
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    if not torch.cuda.is_available():
        raise DeviceError(f"device: {text} requested but CUDA is not available on this machine "
                          f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'})")
    count = torch.cuda.device_count()
    number = int(index or 0)
    if number >= count:
        raise DeviceError(f"device: {text} requested but this machine has {count} CUDA device(s) (cuda:0..cuda:{count - 1})")
    return torch.device("cuda", number)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU); call it around timings."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_memory_bytes(device: torch.device) -> int | None:
    """Free memory on a CUDA device, ``None`` on the CPU (no limit this helper can know)."""
    if device.type != "cuda":
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


@contextmanager
def deterministic_algorithms(enabled: bool) -> Iterator[None]:
    """While active (``enabled``), PyTorch's deterministic algorithms: on CUDA the same seed gives the
    same results, at some speed (cuDNN's autotuning off, deterministic kernels where they are slower,
    a fixed cuBLAS workspace). The CPU's kernels are deterministic already: its results do not change.
    An operation without a deterministic CUDA kernel (e.g. ``adaptive_avg_pool2d``'s backward) warns
    and runs as it is (``warn_only``), so a model that uses one is not reproducible on CUDA. Restores
    the previous settings on exit (the inline engine runs in the caller's process)."""
    if not enabled:
        yield
        return
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    # cuBLAS reads it when it makes its workspace, i.e. before the first matrix product on the GPU.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device`` (itself when it is there already). Host → GPU goes through page-locked
    (pinned) memory without blocking, so the host decodes the next tensor while this one is copied;
    PyTorch keeps the pinned block alive until its copy is done."""
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
