"""Random draws on the device a tensor lives on.

A compressor draws with the client's generator (``CompressionContext.generator``, a CPU generator).
PyTorch draws a tensor for a device only with a generator of that device, so on a GPU the draw uses a
generator on the GPU seeded by one draw from the client's: the stream stays a function of the
client's seed, nothing is drawn on the host and copied over, and on the CPU nothing changes (the
client's own generator is used, bit for bit today's draws).
"""

from __future__ import annotations

import torch


def _same_device(generator: torch.Generator, device: torch.device) -> bool:
    if generator.device.type != device.type:
        return False
    return device.index is None or generator.device.index in (None, device.index)


def generator_on(generator: torch.Generator | None, device: torch.device) -> torch.Generator | None:
    """The generator to draw on ``device`` with: ``generator`` itself where it belongs to ``device``;
    else a generator on ``device`` seeded by a single draw from ``generator``. ``None`` (PyTorch's
    global generator) stays ``None``."""
    if generator is None or _same_device(generator, device):
        return generator
    seed = int(torch.randint(2**62, (1,), generator=generator))
    return torch.Generator(device=device).manual_seed(seed)
