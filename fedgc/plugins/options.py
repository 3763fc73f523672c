"""The settings of a part: the options model of a part that takes none (a model, an aggregation rule, a
server optimizer), and the check that refuses a key a part's ``Options`` does not declare, whatever that
model's own ``extra`` setting (a plain pydantic model ignores unknown keys: a typo would run with the
default and stay in ``scenario.yaml``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from fedgc.scenario.errors import did_you_mean


class NoOptions(BaseModel):
    """No settings: any key is an error."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def declared_keys(options: type[BaseModel]) -> list[str]:
    """The keys ``options`` declares: its fields' names and their aliases."""
    keys: list[str] = []
    for name, field in options.model_fields.items():
        keys += [name] + [a for a in (field.alias, field.validation_alias) if isinstance(a, str) and a != name]
    return keys


def unknown_key(options: type[BaseModel], values: Any) -> str | None:
    """``KEY: unknown key (did you mean `hidden`?)`` for the first key of ``values`` that ``options``
    does not declare (the closest declared key as the hint, as scenario errors give it); None when every
    key is declared, or when ``values`` is no mapping (the options model says what is wrong then)."""
    if not isinstance(values, Mapping):
        return None
    keys = declared_keys(options)
    for key in values:
        if key not in keys:
            text = str(key)[:80]
            guess = did_you_mean(text, keys)
            return f"{text}: unknown key" + (f" (did you mean `{guess}`?)" if guess else "")
    return None
