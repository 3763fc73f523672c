"""value_dtype int8, int4 and sign: a sparse update's values travel in wire format v3's encodings,
the receiver decodes exactly what the sender counted as sent, and error feedback keeps the rounding
(uploads: the compressor's memory; downloads: the server's replica of the client). A compressor's
SparsePayload that breaks the payload's rules is refused before it is sent."""

from __future__ import annotations

import pytest
import torch
from flwr.app import ConfigRecord

from fedgc.compress.base import V3_VALUE_DTYPES, CompressionContext, Compressor, SparsePayload
from fedgc.compress.config import CompressionConfig
from fedgc.compress.downlink import DownlinkConfig, apply_download, make_download, model_digest
from fedgc.compress.payloads import CodedSparsePayload
from fedgc.compress.update import build_compression, compress_update
from fedgc.flower.update_record import BLOB_KEY, decode_update, encode_update
from fedgc.runs.metrics import read_metrics
from fedgc.scenario.model import ScenarioError, validate
from fedgc.wire.quantize import quantize


def update(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"conv.weight": torch.randn(8, 4, 3, 3, generator=g), "conv.bias": torch.randn(8, generator=g),
            "fc.weight": torch.randn(10, 60, generator=g)}


SHAPES = {k: tuple(v.shape) for k, v in update(0).items()}


def blob_version(payloads) -> int:
    """The version byte of the blob ``payloads`` travel in, in either framing (``update_record``)."""
    record = encode_update(payloads)
    blob = record[BLOB_KEY] if isinstance(record, ConfigRecord) else record["update"].numpy().tobytes()
    return int(bytes(blob)[0])


@pytest.mark.parametrize("name, options", [("topk", {"error_feedback": True}), ("randomk", {}), ("threshold", {}),
                                           ("dgc", {"clip_norm": None})])
@pytest.mark.parametrize("value_dtype", V3_VALUE_DTYPES)
def test_a_v3_value_encoding_sends_what_the_receiver_decodes_and_the_memory_keeps_the_rounding(
        name, options, value_dtype):
    config = CompressionConfig.model_validate({"name": name, "density": 0.1, "value_dtype": value_dtype, **options})
    compressor, memory = build_compression(config)
    for round_ in (1, 2):  # the second round starts from the first one's residual
        twin = type(compressor).make_memory(config.options)  # the same state: what compress_update compensates
        twin.load_state_dict({k: v.clone() for k, v in memory.state_dict().items()})
        compensated = {k: twin.compensate(v, k) for k, v in update(round_).items()}
        ctx = CompressionContext(round=round_, density=0.1, generator=torch.Generator().manual_seed(round_))
        out = compress_update(update(round_), compressor, memory, ctx, value_dtype=value_dtype)
        assert blob_version(out.payloads) == 3
        received = decode_update(encode_update(out.payloads), SHAPES)
        for k in SHAPES:
            assert torch.equal(received[k].to_dense(), out.sent[k]), k  # what was counted as sent arrived
            residual = memory.residuals[k] if hasattr(memory, "residuals") else memory.velocities[k]
            assert torch.allclose(out.sent[k] + residual, compensated[k], atol=1e-6), k  # nothing is lost
        bias = out.payloads["conv.bias"].values  # biases: dense, in fp16, the rounding kept too
        assert bias.dtype == torch.float16 and torch.equal(bias, compensated["conv.bias"].half())
        coded = out.payloads["fc.weight"]
        assert isinstance(coded, CodedSparsePayload) and coded.encoding == value_dtype
        kept = compensated["fc.weight"].flatten()[coded.indices]
        assert torch.equal(coded.values, quantize(kept, value_dtype))  # sent: exactly what the receiver sees
        rounding = kept - coded.values
        assert rounding.abs().max() > 0  # these encodings do round the kept values ...
        residual = memory.residuals["fc.weight"] if hasattr(memory, "residuals") else memory.velocities["fc.weight"]
        assert torch.allclose(residual.flatten()[coded.indices], rounding, atol=1e-6)  # ... and the memory keeps it


@pytest.mark.parametrize("value_dtype", ["fp32", "fp16"])
def test_fp32_and_fp16_values_still_travel_as_version_1(value_dtype):
    config = CompressionConfig.model_validate({"name": "topk", "density": 0.1, "value_dtype": value_dtype})
    compressor, memory = build_compression(config)
    out = compress_update(update(0), compressor, memory, CompressionContext(density=0.1), value_dtype=value_dtype)
    assert blob_version(out.payloads) == 1
    assert not any(isinstance(p, CodedSparsePayload) for p in out.payloads.values())


@pytest.mark.parametrize("section, name", [("compression", "qsgd"), ("compression", "powersgd"),
                                           ("compression", "stc"), ("downlink", "qsgd")])
def test_a_v3_value_encoding_for_a_compressor_without_sparse_values_is_a_one_line_error(tiny_scenario, section, name):
    with pytest.raises(ScenarioError) as err:
        validate({**tiny_scenario, section: {"name": name, "value_dtype": "int8"}})
    message = str(err.value)
    assert f"{section}.value_dtype" in message and name in message and "\n" not in message


# --- the SparsePayload rules, checked in compress_update ---------------------------------------

class Unsorted(Compressor):
    """A user's top-k that forgets to sort its indices (and the values with them)."""

    name = "unsorted_topk"
    sparse_values = True

    def compress(self, tensor, name, ctx):
        flat = tensor.detach().flatten()
        keep = torch.topk(flat.abs(), max(1, flat.numel() // 4)).indices  # by magnitude, not by position
        return SparsePayload(keep, flat[keep], tuple(tensor.shape))


class Broken(Compressor):
    """A compressor returning the SparsePayload ``make(flat, shape)``."""

    name = "broken_sparse"

    def __init__(self, make) -> None:
        self.make = make

    def compress(self, tensor, name, ctx):
        return self.make(tensor.detach().flatten(), tuple(tensor.shape))


def test_unsorted_indices_from_a_user_compressor_are_refused_in_one_line_naming_it():
    """At density 1/4 the bitmap encoding wins: unsorted indices would arrive sorted with their
    values in the order sent, applied to the wrong entries with no error anywhere."""
    from fedgc.compress.memory import ResidualMemory

    with pytest.raises(ValueError) as err:
        compress_update(update(0), Unsorted(), ResidualMemory(), CompressionContext())
    message = str(err.value)
    assert "unsorted_topk" in message and "strictly increasing" in message and "\n" not in message


@pytest.mark.parametrize("make, words", [
    (lambda f, s: SparsePayload(torch.tensor([0, 2]), f[[0, 2]], (f.numel(),)), "shape"),
    (lambda f, s: SparsePayload(torch.tensor([0.0, 2.0]), f[[0, 2]], s), "integer"),
    (lambda f, s: SparsePayload(torch.tensor([[0, 2]]), f[[0, 2]], s), "integer"),
    (lambda f, s: SparsePayload(torch.tensor([0, 2]), f[[0, 2, 3]], s), "one value per index"),
    (lambda f, s: SparsePayload(torch.tensor([0, 2]), torch.tensor([1, 2]), s), "floating"),
    (lambda f, s: SparsePayload(torch.tensor([0, 2, 2]), f[[0, 2, 2]], s), "strictly increasing"),
    (lambda f, s: SparsePayload(torch.tensor([1, f.numel()]), f[[1, 0]], s), "outside"),
    (lambda f, s: SparsePayload(torch.tensor([-1, 3]), f[[0, 3]], s), "outside"),
])
def test_a_sparse_payload_that_breaks_its_rules_is_refused_naming_the_compressor(make, words):
    from fedgc.compress.memory import NoMemory

    with pytest.raises(ValueError) as err:
        compress_update({"w": torch.randn(6, 5)}, Broken(make), NoMemory(), CompressionContext())
    assert "broken_sparse" in str(err.value) and words in str(err.value) and "\n" not in str(err.value)


# --- downloads --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["topk", "randomk", "threshold"])
@pytest.mark.parametrize("value_dtype", V3_VALUE_DTYPES)
def test_a_v3_download_rebuilds_the_servers_replica_and_the_replica_keeps_the_rounding(name, value_dtype):
    config = DownlinkConfig(name=name, density=0.2, value_dtype=value_dtype, dense_small_tensors=False,
                            **({"threshold": 0.01} if name == "threshold" else {}))
    replica, target = update(0), update(1)
    errors = [max(float((target[k] - replica[k]).abs().max()) for k in target)]
    for step in range(60):
        download = make_download(target, replica, config, config.compressor(), torch.Generator().manual_seed(step))
        assert blob_version(download.payloads) == 3
        received = decode_update(encode_update(download.payloads), SHAPES)
        assert model_digest(apply_download(replica, received)) == model_digest(download.replica)
        replica = download.replica
        errors.append(max(float((target[k] - replica[k]).abs().max()) for k in target))
    # what a download rounds or leaves out is still in target − replica and goes out later (randomk
    # scales what it sends by n/k, so its replica does not settle, whatever the value encoding)
    if name != "randomk":
        assert errors[-1] < 0.01 * errors[0], errors[::10]


def test_uploads_and_downloads_in_int8_run_end_to_end_on_the_inline_engine(tmp_path, tiny_scenario):
    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.loop import run_rounds

    def run(folder, compression, downlink):
        scenario = validate({**tiny_scenario, "rounds": 3, "compression": compression, "downlink": downlink})
        summary = run_rounds(InlineGrid.for_scenario(scenario), scenario, tmp_path / folder)
        return summary, read_metrics(tmp_path / folder / "metrics.jsonl")

    fp32, _ = run("fp32", {"name": "topk", "density": 0.05}, {"name": "topk", "density": 0.05})
    int8, rows = run("int8", {"name": "topk", "density": 0.05, "value_dtype": "int8"},
                     {"name": "topk", "density": 0.05, "value_dtype": "int8"})
    assert int8.clients_failed == 0 and all(not r.get("rejected_reasons") for r in rows)
    assert sum(r["downlink_resets"] for r in rows) == 0  # every download's digests matched
    assert int8.bytes_up < fp32.bytes_up and int8.bytes_down < fp32.bytes_down
