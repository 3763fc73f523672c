"""The settings model of a part that takes none (a model, an aggregation rule, a server optimizer):
any key given for it is an error."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class NoOptions(BaseModel):
    """No settings: any key is an error."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
