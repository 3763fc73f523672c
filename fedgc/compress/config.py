"""The ``compression`` section of a scenario (pydantic; unknown keys are errors).

The section is flat, as users write it (``compression: {name: dgc, density: 0.01, momentum: 0.9}``),
but each option is declared once, by the compressor that reads it: ``CommonCompression`` holds the
keys every compressor (or the server's density schedule) reads, and ``CompressionConfig`` adds the
fields of every registered compressor's ``Options`` model (``fedgc/compress/dgc.py``'s
``DGCOptions``, …). A new compressor option is a field of its ``Options``, nothing else.
``config.options()`` gives the named compressor's own options as its model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from fedgc.compress.registry import COMPRESSORS, DENSITY_COMPRESSORS


class CommonCompression(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field("dgc", description="compressor name (see fedgc.compress.registry)")
    density: float = Field(0.01, gt=0.0, le=1.0, description="fraction of entries sent after warm-up")
    error_feedback: bool = Field(True, description="keep what was not sent and add it to the next update")
    value_dtype: Literal["fp32", "fp16"] = "fp32"
    dense_small_tensors: bool = Field(True, description="send tensors with dim() <= 1 (biases, norms) dense")
    warmup_rounds: int = Field(0, ge=0, description="rounds of exponentially rising sparsity before `density`, "
                                                     "for the compressors in `warmup_for`")
    warmup_for: list[str] = Field(["dgc"], description="compressors the warm-up applies to: dgc by default; "
                                                        "topk, randomk and stc only when listed here")

    @field_validator("name")
    @classmethod
    def _known_compressor(cls, name: str) -> str:
        if name not in COMPRESSORS:
            raise ValueError(f"unknown compressor {name!r}; known: {', '.join(sorted(COMPRESSORS))}")
        return name

    @field_validator("warmup_for")
    @classmethod
    def _warmable(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in DENSITY_COMPRESSORS:
                raise ValueError(f"{name!r} has no density to warm up; list only compressors that use "
                                 f"compression.density: {', '.join(sorted(DENSITY_COMPRESSORS))}")
        return names

    def options(self) -> BaseModel:
        """The named compressor's own options (its ``Options`` model), as set in this section."""
        model = COMPRESSORS[self.name].Options
        return model(**{field: getattr(self, field) for field in model.model_fields})


def _option_fields() -> dict[str, tuple]:
    """Every compressor's option fields; two compressors may share a name only with one definition."""
    fields: dict[str, tuple] = {}
    owner: dict[str, str] = {}
    for name, cls in COMPRESSORS.items():
        for field, info in cls.Options.model_fields.items():
            if field in CommonCompression.model_fields:
                raise TypeError(f"{name}.Options.{field} shadows a common compression key")
            if field in fields and repr(fields[field][1]) != repr(info):
                raise TypeError(f"{name}.Options.{field} differs from {owner[field]}'s option of that name")
            fields[field], owner[field] = (info.annotation, info), name
    return fields


CompressionConfig = create_model("CompressionConfig", __base__=CommonCompression, **_option_fields())
