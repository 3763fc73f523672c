"""What every model in the registry provides: a pydantic ``Options`` class for its ``model.options``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class NoOptions(BaseModel):
    """Options of a model that takes none (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")
