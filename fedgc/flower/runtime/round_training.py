"""The inline engine's ``client.execution: vectorized``: a round's clients trained at once.

The ``RoundTrainer`` the inline grid calls with a round's delivered train messages. Each client's
training is what its ClientApp would do, from the same entry point (``client_app.train_job``: the
checked message, the model holding the received global model, the local data, the client's
stream); the executor (``fedgc.execution.run_vectorized``) trains them together and each result is
handed to its message's ClientApp call (``fedgc.flower.client.batched``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from flwr.app import ArrayRecord, Context, Message, RecordDict

from fedgc.execution import run_vectorized
from fedgc.flower import keys
from fedgc.flower.client.batched import BatchedUpdate, RoundTrainer
from fedgc.flower.client.client_app import checked_message, train_job
from fedgc.flower.client.downlink_mod import rebuilt_replica
from fedgc.flower.keys import DELTA_KEY
from fedgc.flower.update_record import update_record


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


class RoundTraining(RoundTrainer):
    """Train a round's clients together on ``device``; ``notice`` hears a fallback to sequential."""

    def __init__(self, device: torch.device, notice: Callable[[str], None] = _stderr) -> None:
        self.device = device
        self.notice = notice

    def __call__(self, delivered: list[Message],
                 in_client: Callable[[Message, Callable[[Context], Any]], Any]) -> dict[str, BatchedUpdate]:
        """A compressed download is rebuilt here into the model its client's downlink mod will hand
        the ClientApp (``rebuilt_replica``: the same function, nothing stored), and that client trains
        from it."""
        own_start = any(update_record(m.content, DELTA_KEY) is not None for m in delivered)
        jobs, ready = [], []
        for message in delivered:
            try:
                checked, model, job = in_client(message, lambda context, m=message: self._job(m, context))
            except Exception:  # noqa: BLE001, S112 — its own ClientApp call fails the same way and is counted
                continue
            if own_start:  # replicas differ from client to client
                job.start = {name: t.detach() for name, t in model.state_dict().items()}
            jobs.append(job)
            ready.append((message, checked, model))
        if not jobs:
            return {}
        start = {name: t.detach() for name, t in ready[0][2].state_dict().items()}  # shared unless a job has its own
        results = run_vectorized(ready[0][2], start, jobs, device=self.device, notice=self.notice)
        return {message.metadata.message_id: BatchedUpdate(
                    message_id=message.metadata.message_id, checked=checked,
                    delta={name: t.detach().cpu() for name, t in result.delta.items()}, train=result.train,
                    generator=job.generator)
                for (message, checked, _), job, result in zip(ready, jobs, results)}

    def _job(self, message: Message, context: Context):
        """The message checked once (what its ClientApp call is handed), and its training job."""
        content = self._content(message, context)
        checked = checked_message(content, context)
        return (checked, *train_job(content, context, checked=checked))

    @staticmethod
    def _content(message: Message, context: Context) -> RecordDict:
        """What the ClientApp will be handed: with a compressed download, the model its mod rebuilds."""
        content = message.content
        if update_record(content, DELTA_KEY) is None:
            return content
        replica = rebuilt_replica(message, context)
        return RecordDict({keys.ARRAYS: ArrayRecord({k: v.contiguous() for k, v in replica.items()}),
                           **dict(content.config_records.items())})
