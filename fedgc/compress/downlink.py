"""Downlink compression: the server sends each client a compressed *difference* to the model the
client already holds, instead of the whole global model.

Both sides keep a **replica** per client: the model that client holds. A download is

    payloads = C(global − replica)          (a stateless compressor: topk, randomk, qsgd, …, or a user's)
    replica ← replica + decompress(payloads)

computed identically (same function, same tensors) on the server and in the client, so the two
replicas stay bit-identical; a SHA-256 digest of the replica travels with every download to prove it.
What C leaves out is still in ``global − replica`` and goes out with the next download: the replica
*is* the error-feedback memory, so nothing is dropped, only delayed. The client trains from its
replica; its update is applied to the server's global model as usual. (Same construction as the
model-difference downlinks of Sattler et al., "Sparse Ternary Compression", IEEE TNNLS 2020, and
Philippenko & Dieuleveut's "MCM" with one memory per client.)

No Flower imports here: the Flower side is ``fedgc.flower.server.downlink_stage`` (server) and
``fedgc.flower.client.downlink_mod`` (client).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from fedgc.compress.base import CompressionContext, Compressor, CompressorOptions, Payload, decompress
from fedgc.compress.config import dump_section, read_section
from fedgc.compress.memory import NoMemory
from fedgc.compress.registry import BUILT_IN, COMPRESSORS
from fedgc.compress.update import compress_update

# Stateless compressors only: the replica is the downlink's memory; DGC's momentum, PowerSGD's Q and
# the sign methods' scaled votes have no meaning for a model difference.
DOWNLINK_COMPRESSORS = ("none", "topk", "randomk", "threshold", "qsgd", "natural", "stc", "terngrad")
FIXED = {"error_feedback": False}  # not a key of the section: the replica keeps what a download left out
# The options the resolved ``downlink`` section listed whatever its compressor, before options were per
# compressor (see fedgc.compress.config.LEGACY_COMPRESSION_KEYS).
LEGACY_DOWNLINK_KEYS = frozenset({"threshold", "qsgd_levels"})


def downlink_compressors() -> tuple[str, ...]:
    """What ``downlink.name`` may name: fedgc's stateless compressors and every user compressor
    (registered from Python, named by import path or installed as a plugin), which the server calls
    with a memory that keeps nothing (docs/api.md, "Your own compressor")."""
    return (*DOWNLINK_COMPRESSORS, *(name for name in COMPRESSORS if name not in BUILT_IN))


class DownlinkConfig(BaseModel):
    """The ``downlink`` section of a scenario: ``name`` and ``density`` are the server's, every other key
    is an option of the named compressor (its ``Options`` model, as in the ``compression`` section,
    ``fedgc.compress.config``), but ``error_feedback``, which is always off (the replica is the memory)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field("none", description="compressor for model downloads; none: the dense global model")
    density: float = Field(0.01, gt=0.0, le=1.0, description="fraction of entries sent per download (topk, randomk, stc)")
    options: CompressorOptions = Field(default_factory=lambda: CompressorOptions(error_feedback=False),
                                       description="the named compressor's options (its Options model)")
    others: dict[str, CompressorOptions] = Field(default_factory=dict,
                                                 description="options kept for other compressors, by name")

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        return read_section(data, where="downlink", section_keys=("name", "density"), default_name="none",
                            allowed=downlink_compressors(), fixed=FIXED, legacy=LEGACY_DOWNLINK_KEYS)

    @field_validator("name")
    @classmethod
    def _stateless(cls, name: str) -> str:
        allowed = downlink_compressors()
        if name not in allowed:
            raise ValueError(f"{name!r} cannot compress downloads (stateless compressors only); "
                             f"choose one of: {', '.join(allowed)}")
        return name

    @model_serializer(mode="plain")
    def _flat(self, info: Any) -> dict[str, Any]:
        return dump_section(self, info.mode, ("name", "density"), hidden=FIXED)

    @property
    def enabled(self) -> bool:
        return self.name != "none"

    @property
    def value_dtype(self) -> str:
        return self.options.value_dtype

    @property
    def dense_small_tensors(self) -> bool:
        return self.options.dense_small_tensors

    def compressor(self) -> Compressor:
        return COMPRESSORS[self.name].from_config(self.options)


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
