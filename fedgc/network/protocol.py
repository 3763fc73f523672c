"""The messaging protocol's own cost on top of the links (``network.protocol``): ``ideal`` or ``flower``.

``ideal`` (the default): a message starts moving the moment the server sends it and the round closes
the moment the last kept update arrives; nothing is added to the links' times.

``flower``: Flower 1.41's pull-based protocol (the figures are read from its sources):

* **Pick-up delay.** A SuperNode asks the SuperLink for work, and when there is none sleeps
  ``pull_interval_s`` (``time.sleep(3)`` in ``flwr/supernode/start_client_internal.py``) before asking
  again, so a client starts its download between 0 and ``pull_interval_s`` after the server pushed the
  message. The model charges the expectation, ``pull_interval_s / 2``, to every download (the real
  delay depends on where each client's 3-s cycle happens to be; see docs/sim-to-real.md).
* **Request round trips.** A message travels as a tree of content-addressed objects, each pulled or
  pushed with its own HTTP request, around a few message-level requests (pull, confirm; send). The
  model charges ``requests_down`` round trips of the client's link RTT to every download and
  ``requests_up`` to every upload (the objects are fetched concurrently, so a batch costs about one
  round trip, not one per object).
* **Reply collection step.** The server looks for replies every ``reply_poll_s`` after it pushed the
  round, so a round that closes on an arrival at ``t`` closes at ``start + ceil((t - start) / step) *
  step``: 0.05 s for fedgc's own loop (``fedgc.flower.partition_grid.POLL_INTERVAL_S``), 3 s for Flower's
  ``Grid.send_and_receive`` over HTTP (``flwr/superlink/grid/http_grid.py``). A deadline still caps it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """Protocol costs in seconds; ``Protocol()`` is ``ideal`` (adds nothing)."""

    pickup_s: float = 0.0  # added before every download starts
    requests_down: int = 0  # request round trips charged to every download
    requests_up: int = 0  # ... and to every upload
    reply_poll_s: float = 0.0  # the server's reply collection step (0: sees each reply at once)

    @property
    def ideal(self) -> bool:
        return self == IDEAL

    def close(self, start: float, end: float) -> float:
        """When the server notices a round that closed on an arrival at ``end``."""
        step = self.reply_poll_s
        if step <= 0 or end <= start:
            return end
        steps = math.ceil((end - start) / step - 1e-9)
        return start + steps * step


IDEAL = Protocol()


def protocol_from_config(kind: str, pull_interval_s: float, requests_down: int, requests_up: int,
                         reply_poll_s: float) -> Protocol:
    """``ideal`` adds nothing (its parameters are ignored); ``flower`` uses them as documented above."""
    if kind == "ideal":
        return IDEAL
    if kind == "flower":
        return Protocol(pickup_s=pull_interval_s / 2.0, requests_down=requests_down, requests_up=requests_up,
                        reply_poll_s=reply_poll_s)
    raise ValueError(f"unknown network protocol {kind!r}; known: ideal, flower")
