"""Scenario errors that say the fix: the closest key to a misspelt one ("did you mean `density`?"),
and a YAML syntax error with its line, column, text and what the parser expected.

Walks the pydantic models of ``fedgc.scenario.model.Scenario`` along an error's location; a field typed as
a union (a tagged union such as ``network.link``, or ``X | None``) offers the keys of every model in it.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel

from fedgc.errors import FedgcError


class ScenarioError(FedgcError, ValueError):
    """A scenario cannot be used; ``str(err)`` is one line naming the field and the rule."""



def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation can hold (through Optional, unions, Annotated, lists)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    if typing.get_origin(annotation) is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += [m for m in _models(arg) if m not in found]
    return found


def keys_at(root: type[BaseModel], loc: tuple[Any, ...] | list[Any]) -> list[str]:
    """The keys accepted where ``loc`` (a pydantic error location) ends; [] when that is not known.
    Parts of ``loc`` that are no field (a union's tag, a list index) are stepped over."""
    models = [root]
    for part in loc:
        fields = [m.model_fields[part] for m in models if isinstance(part, str) and part in m.model_fields]
        if not fields:
            continue
        models = [m for f in fields for m in _models(f.annotation)]
        if not models:
            return []
    return sorted({name for m in models for name in m.model_fields})


def did_you_mean(key: str, choices: list[str]) -> str | None:
    """The closest of ``choices`` to ``key`` (difflib, cutoff 0.6), or None."""
    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_key_message(root: type[BaseModel], loc: tuple[Any, ...] | list[Any]) -> str:
    """``unknown key (did you mean `density`?)``, or the section's keys when none is close."""
    keys = keys_at(root, list(loc)[:-1])
    if not loc or not keys:
        return "unknown key (not part of the scenario schema)"
    guess = did_you_mean(str(loc[-1]), keys)
    if guess is not None:
        return f"unknown key (did you mean `{guess}`?)"
    return f"unknown key (the keys here: {', '.join(keys)})"


def yaml_syntax_message(where: str, text: str, err: Any) -> str:  # err: a yaml.MarkedYAMLError (yaml is untyped)
    """One line: ``FILE: invalid YAML at line L, column C: PROBLEM (while parsing ... started at line N): 'the line'``
    from a PyYAML ``MarkedYAMLError`` (``problem``, ``problem_mark``, ``context``, ``context_mark``)."""
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None) or "not valid YAML"
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if mark is None:
        return f"{where}: invalid YAML ({problem})"
    message = f"{where}: invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if "\\t" in problem:
        message += " (YAML indents with spaces, not tabs)"
    if context and "\\t" not in problem:
        opened = (f" started at line {context_mark.line + 1}"
                  if context_mark is not None and context_mark.line != mark.line else "")
        message += f" ({context}{opened})"
    lines = text.splitlines()
    if 0 <= mark.line < len(lines) and lines[mark.line].strip():
        shown = lines[mark.line].strip()
        message += f": {shown[:60]!r}" + ("..." if len(shown) > 60 else "")
    return message
