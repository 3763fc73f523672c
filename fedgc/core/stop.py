"""Stopping a run between rounds, so that an interrupted run keeps its work.

``ask_to_stop(run_dir)`` asks a run in another process (the flower engine's ServerApp) the same way,
through a file the loop looks for after each round.

``stop_requests()`` installs handlers for SIGINT (Ctrl-C) and SIGTERM while a run's rounds go on (in
the main thread; elsewhere, e.g. inside Flower's runtime, signals are left alone): the first signal
only asks the run to stop after the round in progress (one line on stderr says so), and the loop
then writes a checkpoint of that round, ``summary.json`` with ``stopped_reason: interrupted``, the
plots and ``model.pt``. A second signal stops at once (``KeyboardInterrupt``), as before.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

INTERRUPTED = "interrupted"  # a run's stopped_reason when it stopped on Ctrl-C or SIGTERM between rounds


STOP_FILE = ".fedgc-stop"  # in a run folder: stop after the round in progress (engines in other processes)


class StopRequest:
    """Whether a stop was asked for: by a signal to this process, or by the stop file in the run folder
    (how the flower engine asks its ServerApp, which runs in a thread of another process)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.file: Path | None = None

    def watch(self, run_dir: Path | None) -> None:
        """Also stop when ``run_dir/STOP_FILE`` appears (an old one is removed now)."""
        if run_dir is not None:
            self.file = run_dir / STOP_FILE
            self.file.unlink(missing_ok=True)

    @property
    def asked(self) -> bool:
        return self.signal is not None or (self.file is not None and self.file.exists())


def announce_stop() -> None:
    """The one line that says a first signal was taken."""
    print("\nstopping after this round (Ctrl-C again to stop at once)", file=sys.stderr, flush=True)


@contextlib.contextmanager
def stop_requests(enabled: bool = True, on_request: Callable[[], None] | None = announce_stop) -> Iterator[StopRequest]:
    """Yield a ``StopRequest`` set by the first SIGINT or SIGTERM; the second raises KeyboardInterrupt.
    ``on_request`` is called on the first (the round loop passes its observers' ``stopping``)."""
    request = StopRequest()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if request.asked:
            raise KeyboardInterrupt
        request.signal = signum
        if on_request is not None:
            on_request()

    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # started with it ignored (nohup, a background job): keep it so
            previous[sig] = signal.signal(sig, handle)
    except ValueError:  # not the main interpreter
        pass
    try:
        yield request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def ask_to_stop(run_dir: Path) -> None:
    """Ask the run writing ``run_dir`` to stop after its round in progress."""
    (run_dir / STOP_FILE).touch()


def clear_stop(run_dir: Path | None) -> None:
    if run_dir is not None:
        (run_dir / STOP_FILE).unlink(missing_ok=True)


NO_UPDATE_APPLIED = "no_update_applied"  # a run's stopped_reason when it ran every round and applied nothing


def final_stopped_reason(stopped: str, rows: Sequence[Any]) -> str:
    """The ``stopped_reason`` a run ends with, given how its loop ended (``stopped``) and all its
    ``metrics.jsonl`` rows (``RoundRecord``: ``applied``, ``selected``, ``failed``...): a run that ran
    every round (``completed``) without applying one update in the whole run did not complete its
    training — ``no_update_applied: …``, with what became of the selected clients (every client
    failing on a plugin, every update rejected, nobody online); anything else stays as it is (an
    ``idle: …`` run says so already; an interrupted one may apply updates when resumed)."""
    if stopped != "completed" or not rows or any(getattr(row, "applied", 0) for row in rows):
        return stopped
    total = {key: sum(getattr(row, key, 0) or 0 for row in rows)
             for key in ("selected", "failed", "cut", "late", "discarded", "rejected")}
    what = ("no client was online" if not total["selected"] else
            ", ".join(f"{v} {k}" for k, v in total.items() if v or k == "selected"))
    rounds = len({getattr(row, "round", None) for row in rows})
    return (f"{NO_UPDATE_APPLIED}: no update was applied in the whole run ({rounds} round{'s' * (rounds != 1)}, "
            f"{len(rows)} attempt{'s' * (len(rows) != 1)}: {what}; each client's reason in clients.jsonl)")
