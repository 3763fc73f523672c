"""Who watches a run as it goes: the progress line, the run folder's plots, a notebook's ``on_round``.

The round loop knows none of them. It calls each ``RoundObserver`` it was given: ``note`` for a
warning worth a line, ``round_done`` after every attempt of a round (its ``metrics.jsonl`` row and
its ``clients.jsonl`` rows), ``stopping`` on a first Ctrl-C (an observer that talks to the user says
so), and ``finished`` once, after the last round and before ``summary.json`` is written (so a run
folder with a summary has its plots). The engines build the list: ``default_observers`` is what the
command line shows and writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from fedgc.runs.metrics import ClientRecord, RoundRecord, Summary


class RoundObserver:
    """Sees a run's rounds. Every method does nothing unless a subclass overrides it."""

    def started(self, done: list[RoundRecord]) -> None:
        """Before the first round, with the rounds already done (a resumed run; else empty)."""

    def note(self, line: str) -> None:
        """A warning worth one line (the first failing client, a checkpoint not written)."""

    def round_done(self, record: RoundRecord, clients: list[ClientRecord]) -> None:
        """After each attempt of a round: its row of ``metrics.jsonl`` and of ``clients.jsonl``."""

    def finished(self, summary: Summary, rows: list[RoundRecord], weights: dict[str, torch.Tensor]) -> None:
        """Once, at the end: the summary, every round's row (resumed ones included) and the final (or
        last good) global model's weights."""

    def aborted(self) -> None:
        """The run raised (an error, or a second Ctrl-C): ``finished`` will not be called."""

    def stopping(self) -> None:
        """A first Ctrl-C or SIGTERM: the run stops after the round in progress (an observer that talks
        to the user says so; ``fedgc.core.stop``)."""


class ProgressObserver(RoundObserver):
    """The progress line on stderr (``fedgc.reports.progress``); ``enabled`` False (``--quiet``): notes only."""

    def __init__(self, rounds: int, enabled: bool = True) -> None:
        from fedgc.reports.progress import Progress

        self.rounds, self.enabled = rounds, enabled
        self.progress = Progress(rounds, enabled=enabled)
        self.bytes_up = 0

    def started(self, done: list[RoundRecord]) -> None:
        from fedgc.reports.progress import Progress

        self.progress = Progress(self.rounds, enabled=self.enabled, history=done)
        self.bytes_up = sum(r.bytes_up for r in done)

    def note(self, line: str) -> None:
        self.progress.note(line)

    def stopping(self) -> None:
        if self.enabled:
            from fedgc.core.stop import announce_stop

            announce_stop()

    def round_done(self, record: RoundRecord, clients: list[ClientRecord]) -> None:
        self.bytes_up += record.bytes_up
        self.progress.update(record, self.bytes_up)

    def finished(self, summary: Summary, rows: list[RoundRecord], weights: dict[str, torch.Tensor]) -> None:
        self.progress.close()

    def aborted(self) -> None:
        self.progress.close()


class NotebookProgress(RoundObserver):
    """In a Jupyter kernel (no terminal to redraw a line on): a ``tqdm.auto`` bar over the rounds, with
    the latest accuracy and the simulated time."""

    def __init__(self, rounds: int) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=rounds, unit="round", desc="fedgc")
        self.last_accuracy: float | None = None

    def started(self, done: list[RoundRecord]) -> None:
        self.bar.update(len({r.round for r in done}))

    def round_done(self, record: RoundRecord, clients: list[ClientRecord]) -> None:
        if record.accuracy is not None:
            self.last_accuracy = record.accuracy
        accuracy = f"{self.last_accuracy:.1%}" if self.last_accuracy is not None else "-"
        self.bar.set_postfix_str(f"acc {accuracy} sim {record.sim_end_s:.1f}s", refresh=False)
        self.bar.n = record.round
        self.bar.refresh()

    def finished(self, summary: Summary, rows: list[RoundRecord], weights: dict[str, torch.Tensor]) -> None:
        self.bar.close()

    def aborted(self) -> None:
        self.bar.close()


def in_notebook() -> bool:
    """A Jupyter kernel's shell is running this code (IPython's ``get_ipython()`` is a
    ``ZMQInteractiveShell``) and stderr is not a terminal. A process that merely imported IPython or
    ipykernel (a test runner that ran notebooks) is not a notebook."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return type(shell).__name__ == "ZMQInteractiveShell" and not sys.stderr.isatty()


class PlotsObserver(RoundObserver):
    """The run folder's plots (``RUN/plots/``), drawn once at the end."""

    def __init__(self, out_dir: Path, title: str, target_accuracy: float) -> None:
        self.out_dir, self.title, self.target_accuracy = out_dir, title, target_accuracy

    def finished(self, summary: Summary, rows: list[RoundRecord], weights: dict[str, torch.Tensor]) -> None:
        from fedgc.reports.plots import plot_run

        plot_run(rows, self.out_dir / "plots", title=self.title, target_accuracy=self.target_accuracy)


class CallbackObserver(RoundObserver):
    """Calls ``on_round(record)`` after each attempt of a round (a notebook's live plot)."""

    def __init__(self, on_round: Callable[[RoundRecord], object]) -> None:
        self.on_round = on_round

    def round_done(self, record: RoundRecord, clients: list[ClientRecord]) -> None:
        self.on_round(record)


class Recorder(RoundObserver):
    """Keeps what a run produced in memory: its rounds, its clients' rows, its summary and weights."""

    def __init__(self) -> None:
        self.rows: list[RoundRecord] = []
        self.clients: list[ClientRecord] = []
        self.summary: Summary | None = None
        self.weights: dict[str, torch.Tensor] | None = None

    def round_done(self, record: RoundRecord, clients: list[ClientRecord]) -> None:
        self.clients.extend(clients)

    def finished(self, summary: Summary, rows: list[RoundRecord], weights: dict[str, torch.Tensor]) -> None:
        self.summary, self.rows, self.weights = summary, list(rows), weights


def default_observers(rounds: int, out_dir: Path | None, *, quiet: bool, title: str,
                      target_accuracy: float) -> list[RoundObserver]:
    """The progress line (notes only with ``quiet``; in a notebook, a ``tqdm.auto`` bar) and, with a run
    folder, its plots."""
    observers: list[RoundObserver] = [ProgressObserver(rounds, enabled=not quiet and not in_notebook())]
    if not quiet and in_notebook():
        observers.append(NotebookProgress(rounds))
    if out_dir is not None:
        observers.append(PlotsObserver(out_dir, title, target_accuracy))
    return observers
