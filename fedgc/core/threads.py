"""One thread count for PyTorch in every process that computes a run's numbers.

Floating-point sums split across threads round differently with a different thread count — and MKL
may lower its thread count on a busy machine — so every fedgc process that trains, aggregates or
evaluates (the inline engine, the ServerApp's loop, each ClientApp call) pins PyTorch's intra-op
threads to ``FEDGC_THREADS`` (default 1): metrics.jsonl then does not depend on the engine, on
``OMP_NUM_THREADS``, on the machine's core count or on its load (docs/reliability.md).
"""

from __future__ import annotations

import os

import torch

THREADS_ENV = "FEDGC_THREADS"


def pin_threads() -> int:
    """Set torch's intra-op thread count from ``$FEDGC_THREADS`` (default 1); returns it."""
    text = os.environ.get(THREADS_ENV, "1").strip()
    if not text.isdigit() or not 1 <= int(text) <= 1024:
        raise ValueError(f"{THREADS_ENV}={text!r}: expected a whole number of threads from 1 to 1024")
    threads = int(text)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads
