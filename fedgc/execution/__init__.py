"""Client executors for the Flower-free core: a round's selected clients trained one by one
(``run_sequential``, today's semantics) or together with ``torch.func`` (``run_vectorized``), on the
device ``resolve_device`` picks (``auto | cpu | cuda | cuda:N``). No Flower imports here."""

from fedgc.execution.device import DeviceError, free_memory_bytes, resolve_device, synchronize
from fedgc.execution.jobs import TrainJob, TrainResult
from fedgc.execution.sequential import run_sequential, train_one
from fedgc.execution.vectorized import batch_schedule, chunk_size_for_memory, run_vectorized, unsupported_reason

__all__ = [
           "DeviceError",
           "TrainJob",
           "TrainResult",
           "batch_schedule",
           "chunk_size_for_memory",
           "free_memory_bytes",
           "resolve_device",
           "run_sequential",
           "run_vectorized",
           "synchronize",
           "train_one",
           "unsupported_reason",
]
