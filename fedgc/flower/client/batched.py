"""Local updates trained together: the inline engine's batched client execution (``client.execution``).

With ``vectorized`` execution the inline grid hands a round's delivered train messages to a
``RoundTrainer`` (``fedgc.flower.runtime.round_training``) before it runs the ClientApp on any of them; it
trains every client of the round at once (``fedgc.execution.run_vectorized``) and puts each client's
result on its message under two in-process records — never serialized, never on the wire, and gone
before the ClientApp builds its reply. ``client_app.local_update`` takes the result from there
instead of training again; everything after (memory, compression, encoding, the reply) is the
ClientApp's own, per client, unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message

from fedgc.execution.training import LocalTrainResult
from fedgc.flower.keys import BATCHED_DELTA, BATCHED_TRAIN


class RoundTrainer(ABC):
    """Trains a round's clients together before the inline grid delivers their messages."""

    @abstractmethod
    def __call__(self, delivered: list[Message], in_client: Callable[[Message, Callable[[Context], Any]], Any]) -> None:
        """Leave each trained client's result on its message (``attach_batched_update``); a client it
        cannot train is left alone (its ClientApp trains it, or fails the same way and is counted).
        ``in_client(message, call)`` runs ``call(context)`` with that message's node context, holding
        its client's state."""


def attach_batched_update(msg: Message, delta: dict[str, torch.Tensor], result: LocalTrainResult,
                          generator: torch.Generator) -> None:
    """Put a client's batched result on its delivered message (``generator``: its stream after training)."""
    msg.content[BATCHED_DELTA] = ArrayRecord({name: t.detach().cpu().contiguous() for name, t in delta.items()})
    msg.content[BATCHED_TRAIN] = ConfigRecord({"steps": result.steps, "samples": result.samples,
                                               "mean-loss": result.mean_loss,
                                               "generator": generator.get_state().numpy().tobytes()})


def take_batched_update(msg: Message) -> tuple[dict[str, torch.Tensor], LocalTrainResult, torch.Generator] | None:
    """The result ``attach_batched_update`` put on ``msg`` (removed from it), or None."""
    if BATCHED_DELTA not in msg.content.array_records:
        return None
    delta = msg.content.array_records[BATCHED_DELTA].to_torch_state_dict()
    train = msg.content.config_records[BATCHED_TRAIN]
    del msg.content[BATCHED_DELTA], msg.content[BATCHED_TRAIN]
    generator = torch.Generator()
    generator.set_state(torch.frombuffer(bytearray(train["generator"]), dtype=torch.uint8))
    result = LocalTrainResult(steps=int(train["steps"]), samples=int(train["samples"]),
                              mean_loss=float(train["mean-loss"]))
    return delta, result, generator
