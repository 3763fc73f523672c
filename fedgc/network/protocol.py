"""The messaging protocol's own cost on top of the links (``network.protocol``): ``ideal`` or ``flower``.

``ideal`` (the default): a message starts moving the moment the server sends it and the round closes
the moment the last kept update arrives; nothing is added to the links' times.

``flower``: Flower 1.41–1.42's pull-based protocol (the figures are read from its sources):

* **Pick-up delay.** A SuperNode asks the SuperLink for work, and when there is none sleeps
  ``pull_interval_s`` (``time.sleep(3)`` in ``flwr/supernode/start_client_internal.py``) before asking
  again, so a client starts its download between 0 and ``pull_interval_s`` after the server pushed the
  message. The model charges the expectation, ``pull_interval_s / 2``, to every download (the real
  delay depends on where each client's 3-s cycle happens to be; see docs/sim-to-real.md).
* **Request round trips.** A message travels as a tree of content-addressed objects, each pulled or
  pushed with its own HTTP request (at most two at a time), around a few message-level requests (pull,
  confirm; send). The model charges ``requests_down`` round trips of the client's link RTT to every
  download and ``requests_up`` to every upload. The defaults are what the shaped deployment measured
  with a 200 ms RTT for fedgc's train messages (about 17 objects: 5.8–6.1 round trips per download,
  the small objects being pulled two at a time after the large ones; 0.9–1.1 per upload, the send,
  with the objects streaming behind it; docs/sim-to-real.md).
  A model with many more arrays has more objects and more round trips.
* **Reply collection.** The server pulls replies every ``reply_poll_s`` (0.05 s in fedgc's own loop,
  ``fedgc.flower.server.partition_grid.POLL_INTERVAL_S``; 3 s in Flower's ``Grid.send_and_receive`` over HTTP,
  ``flwr/superlink/grid/http_grid.py``). A reply message is listed as soon as the client has sent its
  header, i.e. when its upload *starts*. fedgc's server then takes each reply as its last object
  arrives (``fedgc.flower.server.superlink_grid``): ``pull_backoff_s`` 0, the default. A ServerApp on Flower's
  own grid pulls the reply's objects with exponential backoff instead (``pull_objects`` in
  ``flwr/supercore/inflatable/inflatable_utils.py``: first retry after 1 s, doubling, at most 10 s
  apart; set ``pull_backoff_s: 1``, ``pull_backoff_cap_s: 10``), so it holds a reply at the first retry
  at or after its last byte: tries at 0, 1, 3, 7, 15, 25, 35 … s after the poll that listed it.
  ``uploaded`` is the moment the server holds the reply, and the round closes at the last kept one (a
  deadline still caps it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fedgc.network.sections import FlowerProtocolConfig, ProtocolConfig


@dataclass(frozen=True)
class Protocol:
    """Protocol costs in seconds; ``Protocol()`` is ``ideal`` (adds nothing)."""

    pickup_s: float = 0.0  # added before every download starts
    requests_down: int = 0  # request round trips charged to every download
    requests_up: int = 0  # ... and to every upload
    reply_poll_s: float = 0.0  # the server's reply collection step (0: lists each reply at once)
    pull_backoff_s: float = 0.0  # first retry of a missing reply object (0: pulled as it arrives)
    pull_backoff_cap_s: float = 0.0  # longest wait between retries

    @property
    def ideal(self) -> bool:
        return self == IDEAL

    def held(self, start: float, upload_start: float, arrival: float) -> float:
        """When the server holds a reply whose upload started at ``upload_start`` and whose last byte
        arrived at ``arrival``, in a round that started at ``start``."""
        step = self.reply_poll_s
        listed = upload_start
        if step > 0 and upload_start > start:
            listed = start + math.ceil((upload_start - start) / step - 1e-9) * step
        if arrival <= listed:
            return listed
        if self.pull_backoff_s <= 0:
            return arrival
        waited, delay = 0.0, self.pull_backoff_s
        while listed + waited < arrival - 1e-9:
            waited += delay
            delay = min(2.0 * delay, max(self.pull_backoff_cap_s, self.pull_backoff_s))
        return listed + waited


IDEAL = Protocol()


def protocol_from_config(config: ProtocolConfig) -> Protocol:
    """``ideal`` adds nothing; ``flower`` uses its parameters as documented above."""
    if isinstance(config, FlowerProtocolConfig):
        return Protocol(pickup_s=config.pull_interval_s / 2.0, requests_down=config.requests_down,
                        requests_up=config.requests_up, reply_poll_s=config.reply_poll_s,
                        pull_backoff_s=config.pull_backoff_s, pull_backoff_cap_s=config.pull_backoff_cap_s)
    return IDEAL
