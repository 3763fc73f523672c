"""The disk store's reads and writes beside the round: ``ThreadedStore``, for the inline engine.

A round hands its clients their turns one after another, and each turn reads the client's state
from the store before it and writes it back after (``fedgc.flower.runtime.inline_grid``). With the
disk store that is a few milliseconds of SQLite, CRC-32 and copying a turn (about 2.5 ms for a
1.6 MB DGC state), which the round used to wait for. ``ThreadedStore`` runs them on one I/O thread
instead: a save is queued and the turn goes on; the next client's state is read (``prefetch``) while
this client trains. SQLite and ``zlib.crc32`` release the GIL, and so do PyTorch's operators, so on a
machine with a core to spare the I/O overlaps the training and compression of the turns around it.

What stays exactly as it was:

- *The bytes.* The same states are written in the same order, through the same ``DiskStore``; one
  thread runs every operation, first come first served, so a read queued after a save of the same
  client reads what it wrote. A state read ahead of a save of its client that came later is not
  used: it is read again.
- *Errors.* A read's ``DamagedState`` or ``StoreError`` is raised by the ``load`` that takes it, as
  before. A failed save is raised by the next call into the store and at the latest by ``flush``,
  which the grid calls before it returns a round's replies: a run whose storage fails still stops
  in that round, with the same one line.
- *Checkpoints.* ``state_dict`` and every call that reads the file as a whole wait for the queue
  first, so a checkpoint records every state written before it (a run killed with saves queued
  resumes from its last checkpoint, which never depended on them).

At most ``MAX_QUEUED_SAVES`` states wait to be written (the caller waits beyond that) and
``MAX_AHEAD`` read ahead: the memory this costs is a few states, whatever the population.
"""

from __future__ import annotations

import itertools
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from flwr.app import RecordDict

from fedgc.flower.state.disk_store import DiskStore

MAX_QUEUED_SAVES = 2
MAX_AHEAD = 2


class ThreadedStore:
    """``store`` (a ``DiskStore``) with its loads and saves run on one I/O thread (module docstring)."""

    kind = "disk"

    def __init__(self, store: DiskStore) -> None:
        self.store = store
        self.generation = store.generation  # newest generation saved through this object
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fedgc-client-store")
        self._order = itertools.count()  # the queue's order of submission
        self._saves: list[Future[None]] = []  # queued or done, not yet checked for an error
        self._saved_at: dict[int, int] = {}  # client -> the order of its newest queued save
        self._ahead: dict[int, tuple[int, Future[RecordDict]]] = {}  # client -> (order, its read), oldest first

    @property
    def path(self) -> Any:
        return self.store.path

    @property
    def id(self) -> str:
        return self.store.id

    def prefetch(self, client: int) -> None:
        """Start reading ``client``'s state now: its next ``load`` takes it. At most ``MAX_AHEAD``
        reads wait to be taken; beyond that the oldest is dropped unread."""
        self._raise_failed_save()
        self._ahead.pop(client, None)
        while len(self._ahead) >= MAX_AHEAD:
            self._ahead.pop(next(iter(self._ahead)))
        self._ahead[client] = (next(self._order), self._pool.submit(self.store.load, client))

    def load(self, client: int) -> RecordDict:
        self._raise_failed_save()
        ahead = self._ahead.pop(client, None)
        if ahead is not None and ahead[0] > self._saved_at.get(client, -1):  # read after its newest save
            return ahead[1].result()
        return self._pool.submit(self.store.load, client).result()  # after every save queued before it

    def save(self, client: int, generation: int, state: RecordDict) -> None:
        self._raise_failed_save()
        while len(self._saves) >= MAX_QUEUED_SAVES:
            self._saves.pop(0).result()  # waits for the oldest; raises its error
        self._saved_at[client] = next(self._order)
        self._saves.append(self._pool.submit(self.store.save, client, generation, state))
        self.generation = max(self.generation, int(generation))

    def flush(self) -> None:
        """Wait until every queued save is written; raise the first that failed."""
        saves, self._saves = self._saves, []
        for future in saves:
            future.result()

    def _raise_failed_save(self) -> None:
        done = [f for f in self._saves if f.done()]
        if done:
            self._saves = [f for f in self._saves if not f.done()]
            for future in done:
                future.result()

    def _drained(self) -> DiskStore:
        """The store, once nothing is queued (for the calls that read or change the file as a whole)."""
        self.flush()
        ahead, self._ahead = self._ahead, {}
        for _, future in ahead.values():
            future.exception()  # wait for it (its error would be its load's, and nobody loads it now)
        return self.store

    def replace(self, client: int, state: RecordDict) -> None:
        self._drained().replace(client, state)

    def clients(self) -> list[int]:
        return self._drained().clients()

    def nbytes(self) -> int:
        return self._drained().nbytes()

    def state_dict(self) -> dict:
        return self._drained().state_dict()

    def load_state_dict(self, state: dict) -> None:
        store = self._drained()
        store.load_state_dict(state)
        self.generation = store.generation

    def check_mark(self, state: dict) -> int:
        return self._drained().check_mark(state)

    def close(self) -> None:
        """Wait for what is queued, then close. Errors of writes still queued here are not raised: a run
        meets a failed write at the next call or at its round's ``flush``, and stops for the first."""
        futures = [*self._saves, *(future for _, future in self._ahead.values())]
        self._saves, self._ahead = [], {}
        for future in futures:
            future.exception()
        self._pool.shutdown(wait=True)
        self.store.close()
