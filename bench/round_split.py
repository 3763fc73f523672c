"""Where an inline round's wall time goes: timers wrapped around fedgc's own functions, for the benches.

``RoundSplit(grid)`` wraps, in this process: local training (``client_app.local_update``, and the
vectorized executor), compression and encoding of the update (``compress_update``, ``encode_update``),
the client-state store's loads and writes (the grid's ``store``; with the disk store, the time the
round waits for its I/O thread), Flower's wire serialization of every
message (``inline_grid.roundtrip``), the server's aggregation (``FedgcStrategy.aggregate``), the whole
exchange (``SimulatedExchange.run``, which runs the clients) and evaluation. ``per_round`` gives
seconds per round for each, with ``network model`` = exchange − the clients' execution and ``other``
= the round loop's remainder (selection, message building, records).
"""

from __future__ import annotations

import time
from collections import defaultdict


class RoundSplit:
    def __init__(self, grid) -> None:
        import fedgc.execution
        from fedgc.flower.client import client_app
        from fedgc.flower.runtime import inline_grid
        from fedgc.flower.server.exchange import SimulatedExchange
        from fedgc.flower.server.strategy import FedgcStrategy

        self.seconds: dict[str, float] = defaultdict(float)
        self._wrap(client_app, "local_update", "training")
        self._wrap(fedgc.execution, "run_vectorized", "training")
        self._wrap(client_app, "compress_update", "compression")
        self._wrap(client_app, "encode_update", "compression")
        self._wrap(grid.store, "load", "state I/O")
        self._wrap(grid.store, "save", "state I/O")
        for name in ("prefetch", "flush"):  # the disk store's I/O thread: what the round waits for
            if hasattr(grid.store, name):  # (not in stores before it: the bench measures those too)
                self._wrap(grid.store, name, "state I/O")
        self._wrap(inline_grid, "roundtrip", "wire serialization")
        self._wrap(FedgcStrategy, "aggregate", "aggregation")
        self._wrap(SimulatedExchange, "run", "exchange")
        self._wrap(type(grid), "push_messages", "clients")
        try:
            from fedgc.flower.server import loop

            self._wrap(loop, "evaluate", "evaluation")
        except AttributeError:
            pass

    def _wrap(self, owner, name: str, bucket: str) -> None:
        inner = getattr(owner, name)
        seconds = self.seconds

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[bucket] += time.perf_counter() - t0

        setattr(owner, name, timed)

    def per_round(self, rounds: int, wall: float) -> dict[str, float]:
        s = self.seconds
        inside = s["training"] + s["compression"] + s["state I/O"] + s["wire serialization"]
        split = {
            "training": s["training"], "compression": s["compression"], "state I/O": s["state I/O"],
            "wire serialization": s["wire serialization"], "client other": max(0.0, s["clients"] - inside),
            "network model": max(0.0, s["exchange"] - s["clients"]), "aggregation": s["aggregation"],
            "evaluation": s["evaluation"],
        }
        split["other"] = max(0.0, wall - s["exchange"] - s["aggregation"] - s["evaluation"])
        return {k: round(v / rounds, 4) for k, v in split.items()}
