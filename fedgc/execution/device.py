"""Device selection for the Flower-free core: ``auto | cpu | cuda | cuda:N`` → ``torch.device``."""

from __future__ import annotations

import re

import torch

_SPEC = re.compile(r"^(auto|cpu|cuda)(?::(\d+))?$")
DEVICE_PATTERN = r"^(auto|cpu|cuda(:\d+)?)$"  # the scenario's ``device`` key


class DeviceError(ValueError):
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
