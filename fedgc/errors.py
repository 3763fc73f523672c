"""The family of fedgc's user errors: ``fedgc.FedgcError`` and the run-folder error.

Every error fedgc reports to its user in one line (a bad scenario, unknown or malformed data, a run
folder it cannot use or read, a bad sweep, an engine that is not installed, a plugin it cannot use,
a checkpoint it refuses...) is a ``FedgcError``, so ``except fedgc.FedgcError`` catches them all;
``str(err)`` is the line. Each keeps the base it had before the family existed (most are a
``ValueError``), so code that catches that still does. docs/api.md lists which call raises which.

Imports nothing: every layer (the Flower-free core, the data and network modules, the command line)
may derive from it.
"""

from __future__ import annotations


class FedgcError(Exception):
    """A user error fedgc reports in one line: ``str(err)`` names what is wrong and, where there is
    one, the fix."""


class RunFolderError(FedgcError, ValueError):
    """A run folder cannot be used (``fedgc.run(out=...)``, ``--out``, ``--resume``) or read
    (``fedgc.load_run``, ``fedgc report``); ``str(err)`` is one line naming the folder or file and the
    problem."""


class ChoiceError(FedgcError, ValueError):
    """An argument given a value outside the ones its call documents (``fedgc.table``'s and
    ``Sweep.table``'s ``fmt``, ``Run.to_pandas``'s ``table``), or of another kind (``sweep``'s
    ``jobs``, ``run``'s ``on_round``, the runs given to ``table``, ``report`` and ``plot``); ``str(err)``
    is one line naming the argument, what it must be and the value."""


def expect(ok: bool, argument: str, value: object, what: str) -> None:
    """``ChoiceError`` (one line naming the argument, what it must be and what it was) unless ``ok``:
    the check a public call makes of an argument before it uses it."""
    if not ok:
        import reprlib

        shown = reprlib.repr(value)  # bounded, whatever the object
        raise ChoiceError(f"{argument} must be {what}, not {shown if len(shown) <= 60 else shown[:60] + '…'}")
