"""The ``compression`` section of a scenario (pydantic; unknown keys are errors)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class CompressionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("dgc", description="compressor name (see fedgc.compress.registry)")
    density: float = Field(0.01, gt=0.0, le=1.0, description="fraction of entries sent after warm-up")
    error_feedback: bool = Field(True, description="keep what was not sent and add it to the next update")
    value_dtype: Literal["fp32", "fp16"] = "fp32"
    dense_small_tensors: bool = Field(True, description="send tensors with dim() <= 1 (biases, norms) dense")
    # DGC (Lin et al., 2018; see docs/dgc.md). Ignored by the other compressors; DGC always keeps
    # its residual, so it ignores `error_feedback`.
    momentum: float = Field(0.9, ge=0.0, lt=1.0, description="DGC momentum m in u <- m*u + g")
    nesterov: bool = Field(False, description="Nesterov momentum: u <- m*(u + g); v <- v + u + g")
    momentum_correction: bool = Field(True, description="accumulate momentum u into v (off: v <- v + g)")
    momentum_masking: bool = Field(True, description="zero the momentum u where entries were sent")
    clip_norm: float | None = Field(None, gt=0.0, description="local gradient clipping threshold before N^-1/2 scaling")
    warmup_rounds: int = Field(0, ge=0, description="rounds of exponentially rising sparsity before `density`, "
                                                     "for the compressors in `warmup_for`")
    warmup_for: list[str] = Field(["dgc"], description="compressors the warm-up applies to: dgc by default; "
                                                        "topk, randomk and stc only when listed here")
    momentum_dtype: Literal["fp32", "bf16"] = Field(
        "fp32", description="how DGC stores its momentum u between rounds (bf16: 2 B/param less per client, "
                            "a documented precision trade-off; v stays fp32, nothing is lost)")
    sample_ratio: float = Field(0.01, gt=0.0, le=1.0, description="fraction of |v| sampled to estimate the top-k threshold")
    # The baselines (docs/compressors.md). Each is read only by the compressor named in the comment.
    threshold: float = Field(1e-3, gt=0.0, description="threshold: send entries with |x| >= threshold")
    qsgd_levels: int = Field(15, ge=1, le=32767, description="qsgd: quantization levels s per sign")
    qsgd_bucket_size: int = Field(512, ge=1, description="qsgd: entries sharing one L2 norm")
    powersgd_rank: int = Field(2, ge=1, le=1024, description="powersgd: rank r of the P·Qᵀ approximation")
    signum_momentum: float = Field(0.9, ge=0.0, lt=1.0, description="signum: m <- beta*m + (1-beta)*g")

    @field_validator("name")
    @classmethod
    def _known_compressor(cls, name: str) -> str:
        from fedgc.compress.registry import COMPRESSORS

        if name not in COMPRESSORS:
            raise ValueError(f"unknown compressor {name!r}; known: {', '.join(sorted(COMPRESSORS))}")
        return name

    @field_validator("warmup_for")
    @classmethod
    def _warmable(cls, names: list[str]) -> list[str]:
        from fedgc.compress.registry import DENSITY_COMPRESSORS

        for name in names:
            if name not in DENSITY_COMPRESSORS:
                raise ValueError(f"{name!r} has no density to warm up; list only compressors that use "
                                 f"compression.density: {', '.join(sorted(DENSITY_COMPRESSORS))}")
        return names
