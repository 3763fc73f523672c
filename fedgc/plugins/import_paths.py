"""Import paths (``package.module:attribute``) and who may import them in this process.

A process imports a scenario's import path only when ``imports_allowed`` says so: always in the
process that reads the user's own scenario (the CLI, the API, Flower's simulation runtime started by
fedgc, where ``FEDGC_ALLOW_IMPORTS=1``), and on a deployed SuperNode only for the modules its operator
listed (node config ``plugins="my_pkg,other_pkg"``, ``node_policy``)."""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import re
from collections.abc import Iterator
from typing import Any

from fedgc.scenario.errors import ScenarioError

# Set for the processes of a runtime fedgc starts itself (Flower's simulation runtime): the user's own
# scenario, so its import paths may be imported there too. An operator may set it on a SuperNode.
ALLOW_IMPORTS_ENV = "FEDGC_ALLOW_IMPORTS"
_PATH = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)$")
class PluginError(ScenarioError):
    """A plugin fedgc cannot use; ``str(err)`` is one line naming the plugin and what is wrong."""


# None: every module (the user's own process); a tuple: a node's policy, for the message it handles
# (a context variable: a policy set in one thread never leaks into another, nor outlives its block).
_allowed_modules: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar(
    "fedgc_allowed_modules", default=None)


def is_import_path(name: str) -> bool:
    """``package.module:attribute`` (not ``hf:<dataset id>``, the Hugging Face datasets' prefix)."""
    return _PATH.match(name) is not None and not name.startswith("hf:")


def imports_allowed(module: str) -> bool:
    """Whether this process may import ``module`` for a scenario's import path."""
    allowed = _allowed_modules.get()
    if allowed is None or os.environ.get(ALLOW_IMPORTS_ENV) == "1":
        return True
    return any(module == m or module.startswith(m + ".") for m in allowed)


@contextlib.contextmanager
def node_policy(listed: str | None) -> Iterator[None]:
    """Within it, only the modules ``listed`` (comma-separated, a node config's ``plugins``) may be
    imported for an import path, or loaded as a ``fedgc.plugins`` entry point: what a deployed
    ClientApp reads from a server (a message, the run config's scenario) is validated here."""
    token = _allowed_modules.set(tuple(m.strip() for m in str(listed or "").split(",") if m.strip()))
    try:
        yield
    finally:
        _allowed_modules.reset(token)


def import_object(path: str, kind: str) -> Any:
    """The object an import path ``package.module:attribute`` names; ``PluginError`` (one line) when
    the path is malformed, not allowed in this process, or does not resolve."""
    match = _PATH.match(path)
    if match is None:
        raise PluginError(f"{kind} {path!r}: an import path is package.module:attribute")
    module_name, attribute = match.groups()
    if not imports_allowed(module_name):
        raise PluginError(f"{kind} {path!r}: this node does not import {module_name} (its operator lists the "
                          "modules it may import in node config plugins=...)")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise PluginError(f"{kind} {path!r}: cannot import {module_name} ({err})".splitlines()[0]) from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 — a module that raises (or exits) on import: one line
        raise PluginError(f"{kind} {path!r}: importing {module_name} raised {type(err).__name__}: {err}"
                          .splitlines()[0]) from None
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise PluginError(f"{kind} {path!r}: {module_name} has no attribute {attribute}")
        value = getattr(value, part)
    return value
