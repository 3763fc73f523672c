"""``--jobs N``: a sweep's points (and seeds) run in N processes at a time.

Each point is an ordinary run in a process of its own, forked from a fork server (a fresh interpreter
that imported fedgc once, so nothing of the parent's threads or state is inherited and no worker pays
for the imports again), with PyTorch pinned to ``$FEDGC_THREADS`` threads as in every
fedgc process (``fedgc.core.threads``), so a point's numbers do not depend on which process ran it
or on what ran beside it: a sweep with ``--jobs 2`` writes the same files as with ``--jobs 1``
(``tests/test_sweep_jobs.py``). Results come back in the sweep's order, whatever order they finish in.
Progress lines are off in the workers (N lines would overwrite each other).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from typing import TypeVar, cast

Task = TypeVar("Task")
Result = TypeVar("Result")
# Imported once, by the fork server.
PRELOAD = ["fedgc.sweeps.runner", "fedgc.runs.engines", "fedgc.core.parts", "fedgc.reports.plots"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # killed but not yet reaped by its own parent: a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _die_with(sweep_pid: int) -> None:
    """A worker ends as soon as the sweep's process is gone (killed with SIGKILL: nothing else would tell
    it), so no point runs on behind a sweep that is no more (it resumes from its checkpoint)."""
    import signal
    import threading
    import time

    def watch() -> None:
        while _alive(sweep_pid):
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="fedgc-sweep-watch", daemon=True).start()


def default_jobs() -> int:
    """The number of cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_jobs(text: str) -> int:
    """``--jobs`` value: a whole number >= 1 (argparse ``type``)."""
    import argparse

    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes >= 1, got {text!r}")
    return int(text)


def run_all(function: Callable[[Task], Result], tasks: Sequence[Task], jobs: int,
            started: Callable[[int], None] | None = None) -> list[Result]:
    """``[function(task) for task in tasks]``, in up to ``jobs`` processes (``function`` and the tasks
    must pickle). ``started(i)`` is called as task i is handed out. The first task to raise (in the
    sweep's order, among those that ran) stops the others and its exception is raised here."""
    if jobs <= 1 or len(tasks) <= 1:
        results = []
        for index, task in enumerate(tasks):
            if started is not None:
                started(index)
            results.append(function(task))
        return results
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context,
                             initializer=_die_with, initargs=(os.getpid(),)) as pool:
        futures = []
        for index, task in enumerate(tasks):
            if started is not None:
                started(index)
            futures.append(pool.submit(function, task))
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        if any(f.done() and not f.cancelled() and f.exception() is not None for f in futures):
            for future in futures:
                future.cancel()
            wait(futures)
        for future in futures:  # the first failure in the sweep's order
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise cast(BaseException, future.exception())  # cast: not None, checked on the line above
        return [future.result() for future in futures]
