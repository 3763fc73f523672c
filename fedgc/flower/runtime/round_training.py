"""The inline engine's ``client.execution: vectorized``: a round's clients trained at once.

The ``RoundTrainer`` the inline grid calls with a round's delivered train messages. Each client's
training is what its ClientApp would do, from the same entry point (``client_app.train_job``: the
checked message, the model holding the received global model, the local data, the client's
stream); the executor (``fedgc.execution.run_vectorized``) trains them together and each result is
left on its message (``fedgc.flower.client.batched``) for the ClientApp to take.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from flwr.app import ArrayRecord, Context, Message, RecordDict

from fedgc.execution import run_vectorized
from fedgc.flower import keys
from fedgc.flower.client.batched import RoundTrainer, attach_batched_update
from fedgc.flower.client.client_app import train_job
from fedgc.flower.client.downlink_mod import rebuilt_replica
from fedgc.flower.server.downlink_stage import DELTA_KEY


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


class RoundTraining(RoundTrainer):
    """Train a round's clients together on ``device``; ``notice`` hears a fallback to sequential."""

    def __init__(self, device: torch.device, notice: Callable[[str], None] = _stderr) -> None:
        self.device = device
        self.notice = notice

    def __call__(self, delivered: list[Message], in_client: Callable[[Message, Callable[[Context], Any]], Any]) -> None:
        """A compressed download is rebuilt here into the model its client's downlink mod will hand
        the ClientApp (``rebuilt_replica``: the same function, nothing stored), and that client trains
        from it."""
        own_start = any(DELTA_KEY in m.content.array_records for m in delivered)
        jobs, ready = [], []
        for message in delivered:
            try:
                model, job = in_client(message, lambda context, m=message: train_job(self._content(m, context), context))
            except Exception:  # noqa: BLE001, S112 — its own ClientApp call fails the same way and is counted
                continue
            if own_start:  # replicas differ from client to client
                job.start = {name: t.detach() for name, t in model.state_dict().items()}
            jobs.append(job)
            ready.append((message, model))
        if not jobs:
            return
        start = {name: t.detach() for name, t in ready[0][1].state_dict().items()}  # shared unless a job has its own
        results = run_vectorized(ready[0][1], start, jobs, device=self.device, notice=self.notice)
        for (message, _), job, result in zip(ready, jobs, results):
            attach_batched_update(message, result.delta, result.train, job.generator)

    @staticmethod
    def _content(message: Message, context: Context) -> RecordDict:
        """What the ClientApp will be handed: with a compressed download, the model its mod rebuilds."""
        content = message.content
        if DELTA_KEY not in content.array_records:
            return content
        replica = rebuilt_replica(message, context)
        return RecordDict({keys.ARRAYS: ArrayRecord({k: v.contiguous() for k, v in replica.items()}),
                           **dict(content.config_records.items())})
