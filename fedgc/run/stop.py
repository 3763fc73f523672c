"""Stopping a run between rounds, so that an interrupted run keeps its work.

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

INTERRUPTED = "interrupted"  # a run's stopped_reason when it stopped on Ctrl-C or SIGTERM between rounds


class StopRequest:
    """Whether a stop was asked for, and by which signal."""

    def __init__(self) -> None:
        self.signal: int | None = None

    @property
    def asked(self) -> bool:
        return self.signal is not None


@contextlib.contextmanager
def stop_requests(enabled: bool = True, quiet: bool = False):
    """Yield a ``StopRequest`` set by the first SIGINT or SIGTERM; the second raises KeyboardInterrupt."""
    request = StopRequest()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handle(signum, frame):
        if request.asked:
            raise KeyboardInterrupt
        request.signal = signum
        if not quiet:
            print("\nstopping after this round (Ctrl-C again to stop at once)", file=sys.stderr, flush=True)

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
