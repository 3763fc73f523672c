"""Downlink compression: the server sends each client a compressed *difference* to the model the
client already holds, instead of the whole global model.

Both sides keep a **replica** per client: the model that client holds. A download is

    payloads = C(global − replica)          (any stateless compressor: topk, randomk, qsgd, …)
    replica ← replica + decompress(payloads)

computed identically (same function, same tensors) on the server and in the client, so the two
replicas stay bit-identical; a SHA-256 digest of the replica travels with every download to prove it.
What C leaves out is still in ``global − replica`` and goes out with the next download: the replica
*is* the error-feedback memory, so nothing is dropped, only delayed. The client trains from its
replica; its update is applied to the server's global model as usual. (Same construction as the
model-difference downlinks of Sattler et al., "Sparse Ternary Compression", IEEE TNNLS 2020, and
Philippenko & Dieuleveut's "MCM" with one memory per client.)

No Flower imports here: the Flower side is ``fedgc.flower.downlink_stage`` (server) and
``fedgc.flower.downlink_mod`` (client).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fedgc.compress.base import CompressionContext, Compressor, Payload, decompress
from fedgc.compress.config import CompressionConfig
from fedgc.compress.memory import NoMemory
from fedgc.compress.update import build_compression, compress_update

# Stateless compressors only: the replica is the downlink's memory; DGC's momentum, PowerSGD's Q and
# the sign methods' scaled votes have no meaning for a model difference.
DOWNLINK_COMPRESSORS = ("none", "topk", "randomk", "threshold", "qsgd", "natural", "stc", "terngrad")


class DownlinkConfig(BaseModel):
    """The ``downlink`` section of a scenario."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("none", description="compressor for model downloads; none: the dense global model")
    density: float = Field(0.01, gt=0.0, le=1.0, description="fraction of entries sent per download (topk, randomk, stc)")
    value_dtype: Literal["fp32", "fp16"] = "fp32"
    dense_small_tensors: bool = Field(True, description="send tensors with dim() <= 1 (biases, norms) dense")
    threshold: float = Field(1e-3, gt=0.0, description="threshold: send entries with |x| >= threshold")
    qsgd_levels: int = Field(15, ge=1, le=32767)

    @field_validator("name")
    @classmethod
    def _stateless(cls, name: str) -> str:
        if name not in DOWNLINK_COMPRESSORS:
            raise ValueError(f"{name!r} cannot compress downloads (stateless compressors only); "
                             f"choose one of: {', '.join(DOWNLINK_COMPRESSORS)}")
        return name

    @property
    def enabled(self) -> bool:
        return self.name != "none"

    def compressor(self) -> Compressor:
        config = CompressionConfig(name=self.name, density=self.density, error_feedback=False,
                                   value_dtype=self.value_dtype, dense_small_tensors=self.dense_small_tensors,
                                   threshold=self.threshold, qsgd_levels=self.qsgd_levels)
        return build_compression(config)[0]


Weights = dict[str, torch.Tensor]


@dataclass
class Download:
    payloads: dict[str, Payload]
    replica: Weights  # the client's model once it has applied the payloads
    elements_sent: int
    elements_total: int


def model_digest(weights: Weights) -> str:
    """SHA-256 over the tensors' names, shapes and fp32 bytes, in name order (16 hex digits)."""
    h = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name].detach().to(torch.float32).contiguous()
        h.update(f"{name}{tuple(tensor.shape)}".encode())
        h.update(tensor.cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def as_replica(weights: Weights) -> Weights:
    return {name: t.detach().to(torch.float32).clone() for name, t in weights.items()}


def apply_download(replica: Weights, payloads: dict[str, Payload]) -> Weights:
    """The replica after a download: ``replica + decompress(payloads)`` (the client and the server
    both call exactly this, so their results are bit-identical)."""
    return {name: replica[name] + decompress(payloads[name], replica[name].device).reshape(replica[name].shape)
            for name in replica}


def make_download(target: Weights, replica: Weights, config: DownlinkConfig, compressor: Compressor,
                  generator: torch.Generator | None = None) -> Download:
    """Compress ``target − replica`` (``target``: the global model to send)."""
    difference = {name: target[name].to(torch.float32) - replica[name] for name in replica}
    ctx = CompressionContext(density=config.density, generator=generator)
    compressed = compress_update(difference, compressor, NoMemory(), ctx,
                                 dense_small_tensors=config.dense_small_tensors, value_dtype=config.value_dtype)
    return Download(compressed.payloads, apply_download(replica, compressed.payloads),
                    compressed.elements_sent, compressed.elements_total)
