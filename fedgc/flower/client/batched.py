"""Local updates trained together: the inline engine's batched client execution (``client.execution``).

With ``vectorized`` execution the inline grid hands a round's delivered train messages to a
``RoundTrainer`` (``fedgc.flower.runtime.round_training``) before it runs the ClientApp on any of them;
it trains every client of the round at once (``fedgc.execution.run_vectorized``) and returns each
client's ``BatchedUpdate``, keyed by its message's id. The grid then runs each message's ClientApp
inside ``handing_over(update)``: an in-process hand-off (a context variable, never on the Flower
message, never on the wire) that the ClientApp's ``train`` takes once (``take_batched_update``)
instead of checking the message and training again; everything after (memory, compression, encoding,
the reply) is the ClientApp's own, per client, unchanged.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from flwr.app import Context, Message

from fedgc.execution.training import LocalTrainResult


@dataclass(frozen=True)
class BatchedUpdate:
    """One client's result of a batched round, for the ClientApp call of the message it answers."""

    message_id: str
    checked: tuple[Any, Any, dict]  # the message's ``client_app.checked_message``: checked once, by the trainer
    delta: dict[str, torch.Tensor]  # on the host
    train: LocalTrainResult
    generator: torch.Generator  # the client's stream after training: its compressor draws from it


class RoundTrainer(ABC):
    """Trains a round's clients together before the inline grid delivers their messages."""

    @abstractmethod
    def __call__(self, delivered: list[Message],
                 in_client: Callable[[Message, Callable[[Context], Any]], Any]) -> dict[str, BatchedUpdate]:
        """Each trained client's result, by its message's id; a client it cannot train is left out (its
        ClientApp trains it, or fails the same way and is counted). ``in_client(message, call)`` runs
        ``call(context)`` with that message's node context, holding its client's state."""


_HANDED: ContextVar[BatchedUpdate | None] = ContextVar("fedgc_batched_update", default=None)


@contextlib.contextmanager
def handing_over(update: BatchedUpdate | None) -> Iterator[None]:
    """Within this block, ``take_batched_update`` of ``update``'s message returns it (once)."""
    token = _HANDED.set(update)
    try:
        yield
    finally:
        _HANDED.reset(token)


def take_batched_update(msg: Message) -> BatchedUpdate | None:
    """The result handed over for ``msg`` (then no longer handed over), or None: train it here."""
    update = _HANDED.get()
    if update is None or update.message_id != msg.metadata.message_id:
        return None
    _HANDED.set(None)
    return update
