"""Per-compressor options: the ``compression`` and ``downlink`` sections read the named compressor's
``Options`` model; another compressor's key is a one-line error; options for another compressor are
kept under its name; a user compressor with its own ``Options`` fits the same way."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from pydantic import Field

from fedgc.compress.base import CompressionContext, Compressor, CompressorOptions, DensePayload
from fedgc.compress.config import LEGACY_COMPRESSION_KEYS, CompressionConfig
from fedgc.compress.downlink import DownlinkConfig
from fedgc.compress.registry import COMPRESSORS, add_compressor, check_compressor
from fedgc.compress.update import build_compression
from fedgc.scenario.model import ScenarioError, validate


def scenario(**sections):
    return validate({"name": "t", "rounds": 1, **sections})


def error(**sections) -> str:
    with pytest.raises(ScenarioError) as caught:
        scenario(**sections)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_key_of_another_compressor_is_one_line_naming_both_and_the_keys():
    message = error(compression={"name": "topk", "qsgd_levels": 3})
    assert message.startswith("compression.qsgd_levels: an option of qsgd, not of topk (topk's keys: name, density, ")
    assert "error_feedback, value_dtype, dense_small_tensors)" in message
    assert "write it under compression.qsgd" in message
    message = error(compression={"name": "none", "momentum": 0.95})
    assert message.startswith("compression.momentum: an option of dgc, not of none")


def test_the_named_compressors_flat_keys_still_work_and_reach_it():
    s = scenario(compression={"name": "qsgd", "qsgd_levels": 3, "qsgd_bucket_size": 64, "value_dtype": "fp16"})
    compressor, _ = build_compression(s.compression)
    assert (compressor.levels, compressor.bucket_size) == (3, 64)
    assert s.compression.options.value_dtype == s.compression.value_dtype == "fp16"
    dgc = scenario(compression={"name": "dgc", "momentum": 0.5, "clip_norm": 2.0})
    assert dgc.compression.options.momentum == 0.5 and build_compression(dgc.compression)[0].clip_norm == 2.0


def test_options_for_another_compressor_are_kept_under_its_name_for_a_sweep():
    tree = {"name": "topk", "density": 0.1, "dgc": {"momentum": 0.5}, "qsgd": {"qsgd_levels": 3}}
    s = scenario(compression=tree)
    assert s.compression.name == "topk" and type(s.compression.options) is CompressorOptions
    dumped = s.model_dump(mode="json")["compression"]
    assert dumped["dgc"] == {"momentum": 0.5} and dumped["qsgd"] == {"qsgd_levels": 3} and "momentum" not in dumped
    assert scenario(compression=dumped).compression == s.compression  # the resolved form reads back
    as_dgc = scenario(compression={**tree, "name": "dgc"})  # --set compression.name=dgc
    assert as_dgc.compression.options.momentum == 0.5 and "dgc" not in as_dgc.model_dump()["compression"]
    flat_wins = scenario(compression={**tree, "name": "dgc", "momentum": 0.25})
    assert flat_wins.compression.options.momentum == 0.25


def test_errors_inside_a_kept_section_and_unknown_keys():
    assert error(compression={"name": "topk", "dgc": {"momentm": 0.5}}).startswith(
        "compression.dgc.momentm: not an option of dgc (dgc's keys: error_feedback, ")
    assert error(compression={"name": "topk", "qsgd": {"qsgd_levels": 0}}).startswith(
        "compression.qsgd.qsgd_levels: Input should be greater than or equal to 1")
    assert error(compression={"name": "topk", "densty": 0.1}) == "compression.densty: unknown key (did you mean `density`?)"
    assert error(compression={"name": "qsgd", "qsgd_levels": 0}).startswith("compression.qsgd_levels: Input should be")
    assert "unknown compressor 'zip'" in error(compression={"name": "zip", "qsgd_levels": 3})


def test_an_old_resolved_section_is_refused_in_one_line_that_names_what_to_delete():
    """A scenario.yaml written before options were per compressor listed every compressor's options. Its
    foreign keys are refused, all named in one line that says to delete them (never silently dropped);
    once deleted, the section reads as the run it described."""
    old = {"name": "dgc", "density": 0.01, "error_feedback": True, "value_dtype": "fp32", "dense_small_tensors": True,
           "warmup_rounds": 5, "warmup_for": ["dgc"], "threshold": 0.001, "momentum": 0.9, "nesterov": False,
           "momentum_correction": True, "momentum_masking": True, "clip_norm": None, "momentum_dtype": "fp32",
           "sample_ratio": 0.01, "signum_momentum": 0.9, "qsgd_levels": 15, "qsgd_bucket_size": 512, "powersgd_rank": 2}
    assert LEGACY_COMPRESSION_KEYS <= old.keys()
    down = {"name": "none", "density": 0.01, "value_dtype": "fp32", "dense_small_tensors": True, "threshold": 0.001,
            "qsgd_levels": 15}
    foreign = ["threshold", "signum_momentum", "qsgd_levels", "qsgd_bucket_size", "powersgd_rank"]
    assert error(compression=old) == (
        f"compression: {', '.join(foreign)}: other compressors' options at their defaults, as an older fedgc "
        "wrote every compressor's options into compression; dgc never read them: delete these keys "
        "(the run is the same without them)")
    assert error(downlink=down).startswith("downlink: threshold, qsgd_levels: other compressors' options")
    s = scenario(compression={k: v for k, v in old.items() if k not in foreign}, downlink={
        k: v for k, v in down.items() if k not in ("threshold", "qsgd_levels")})
    assert s.compression == CompressionConfig(warmup_rounds=5) and s.downlink == DownlinkConfig()
    assert "compression.qsgd_levels: an option of qsgd" in error(compression={**old, "qsgd_levels": 3})


def test_the_downlink_reads_its_compressors_options():
    s = scenario(downlink={"name": "qsgd", "qsgd_levels": 7, "qsgd_bucket_size": 64})
    compressor = s.downlink.compressor()
    assert (compressor.levels, compressor.bucket_size) == (7, 64)
    assert s.model_dump()["downlink"] == {"name": "qsgd", "density": 0.01, "value_dtype": "fp32",
                                          "dense_small_tensors": True, "qsgd_levels": 7, "qsgd_bucket_size": 64}
    randomk = scenario(downlink={"name": "randomk"}).downlink
    assert randomk.options.error_feedback is False and randomk.compressor().unbiased  # the replica is the memory
    assert error(downlink={"name": "topk", "qsgd_levels": 3}).startswith(
        "downlink.qsgd_levels: an option of qsgd, not of topk (topk's keys: name, density, value_dtype, dense_small_tensors)")
    assert error(downlink={"name": "topk", "momentum": 0.9}).startswith("downlink.momentum: an option of dgc, not of topk")
    assert "under downlink" not in error(downlink={"name": "topk", "momentum": 0.9})  # dgc cannot compress downloads
    assert error(downlink={"name": "topk", "error_feedback": True}).startswith("downlink.error_feedback: not a key here")
    kept = scenario(downlink={"name": "topk", "threshold": {"threshold": 0.5}}).downlink
    assert kept.model_dump()["threshold"] == {"threshold": 0.5}
    assert scenario(downlink={**kept.model_dump(), "name": "threshold"}).downlink.compressor().threshold == 0.5


class ScaledOptions(CompressorOptions):
    scaled_factor: float = Field(0.5, gt=0.0, description="scaled: factor applied before sending")


class Scaled(Compressor):
    """A user's compressor: its own Options, built by from_config."""

    name: ClassVar[str] = "scaled"
    Options = ScaledOptions

    def __init__(self, factor: float = 0.5) -> None:
        self.factor = factor

    @classmethod
    def from_config(cls, options: ScaledOptions) -> Scaled:
        return cls(options.scaled_factor)

    def compress(self, tensor: torch.Tensor, name: str, ctx: CompressionContext) -> DensePayload:
        return DensePayload(values=tensor.flatten() * self.factor, shape=tuple(tensor.shape))


def test_a_user_compressor_with_its_own_options_fits():
    from fedgc.flower.client_config import client_option_names

    add_compressor(Scaled)
    try:
        s = scenario(compression={"name": "scaled", "scaled_factor": 0.25})
        compressor, _memory = build_compression(s.compression)
        assert isinstance(compressor, Scaled) and compressor.factor == 0.25
        assert client_option_names("scaled") == ("error_feedback", "value_dtype", "dense_small_tensors", "scaled_factor")
        assert error(compression={"name": "topk", "scaled_factor": 2.0}).startswith(
            "compression.scaled_factor: an option of scaled, not of topk")
        with pytest.raises(ValueError, match="exists already"):
            add_compressor(type("Other", (Scaled,), {"name": "topk"}))
    finally:
        COMPRESSORS.pop("scaled", None)


def test_a_compressor_class_is_checked():
    class Loose(Compressor):
        name = "loose"
        Options = ScaledOptions.__base__.__base__  # pydantic's BaseModel, not CompressorOptions

        def compress(self, tensor, name, ctx):
            raise NotImplementedError

    with pytest.raises(TypeError, match=r"must subclass .*CompressorOptions"):
        check_compressor(Loose)

    class Shadow(CompressorOptions):
        density: float = 0.5

    with pytest.raises(TypeError, match=r"Options.density shadows a key of the compression section"):
        check_compressor(type("Shadowing", (Scaled,), {"name": "shadowing", "Options": Shadow}))


def test_setting_another_name_keeps_the_named_compressors_options_for_it(tmp_path):
    """``--set``/``--sweep compression.name=…`` over a DGC scenario: DGC's flat options are kept under
    ``compression.dgc``; the DGC point reads them again."""
    from fedgc.scenario.model import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text("name: s\nrounds: 1\ncompression: {name: dgc, momentum: 0.5, clip_norm: 2.0, error_feedback: false}\n"
                    "downlink: {name: qsgd, qsgd_levels: 3}\n")
    none = load_scenario(path, ["compression.name=none", "downlink.name=topk"])
    assert none.model_dump()["compression"]["dgc"] == {"momentum": 0.5, "clip_norm": 2.0}
    assert none.compression.error_feedback is False  # a common option stays flat
    assert none.model_dump()["downlink"]["qsgd"] == {"qsgd_levels": 3}
    back = load_scenario(path, ["compression.name=topk", "compression.name=dgc"])
    assert (back.compression.options.momentum, back.compression.options.clip_norm) == (0.5, 2.0)
    threshold = tmp_path / "t.yaml"
    threshold.write_text("name: t\nrounds: 1\ncompression: {name: threshold, threshold: 0.5}\n")
    topk = load_scenario(threshold, ["compression.name=topk"])
    assert topk.model_dump()["compression"]["threshold"] == {"threshold": 0.5}
