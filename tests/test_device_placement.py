"""The scenario's ``device`` (auto | cpu | cuda | cuda:N): where clients train and the server
evaluates. On the CPU it changes nothing (byte-identical metrics); a device the machine lacks is a
one-line error before anything runs, and a malformed one a scenario error. ``deterministic: true``
(CUDA's deterministic algorithms) changes nothing on the CPU either, and leaves PyTorch's settings as
it found them."""

from __future__ import annotations

import pytest
import torch
import yaml

from fedgc.cli.run import main


def _run(tmp_path, tiny_scenario, name: str, device: str | None, capsys, **keys) -> tuple[int, str]:
    tree = {**tiny_scenario, "name": name, **keys}
    if device is not None:
        tree["device"] = device
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    code = main([str(path), "--out", str(tmp_path / name), "--quiet"])
    return code, capsys.readouterr().err


def test_device_cpu_gives_the_metrics_of_a_run_without_the_key(tmp_path, tiny_scenario, capsys):
    assert _run(tmp_path, tiny_scenario, "plain", None, capsys)[0] == 0
    assert _run(tmp_path, tiny_scenario, "cpu", "cpu", capsys)[0] == 0
    assert (tmp_path / "cpu" / "metrics.jsonl").read_bytes() == (tmp_path / "plain" / "metrics.jsonl").read_bytes()
    assert (tmp_path / "cpu" / "clients.jsonl").read_bytes() == (tmp_path / "plain" / "clients.jsonl").read_bytes()


def test_deterministic_gives_the_metrics_of_a_run_without_it_on_the_cpu(tmp_path, tiny_scenario, capsys):
    assert _run(tmp_path, tiny_scenario, "plain", "cpu", capsys)[0] == 0
    assert _run(tmp_path, tiny_scenario, "det", "cpu", capsys, deterministic=True)[0] == 0
    assert (tmp_path / "det" / "metrics.jsonl").read_bytes() == (tmp_path / "plain" / "metrics.jsonl").read_bytes()
    assert (tmp_path / "det" / "clients.jsonl").read_bytes() == (tmp_path / "plain" / "clients.jsonl").read_bytes()
    assert not torch.are_deterministic_algorithms_enabled()  # the run gave the settings back


def test_deterministic_algorithms_are_on_inside_and_restored_after():
    from fedgc.execution.device import deterministic_algorithms

    with deterministic_algorithms(True):
        assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
        assert not torch.backends.cudnn.benchmark
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic
    with deterministic_algorithms(False):
        assert not torch.are_deterministic_algorithms_enabled()


def test_a_node_asks_for_deterministic_training_in_its_node_config():
    from flwr.app import Context, RecordDict

    from fedgc.flower.client.client_app import client_deterministic

    def context(node_config):
        return Context(run_id=1, node_id=1, node_config=node_config, state=RecordDict(), run_config={})

    assert client_deterministic(context({"deterministic": True}))
    assert not client_deterministic(context({"deterministic": False})) and not client_deterministic(context({}))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_one_line_and_exit_2(tmp_path, tiny_scenario, capsys):
    code, err = _run(tmp_path, tiny_scenario, "gpu", "cuda", capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: device: cuda requested but CUDA is not available on this machine")
    assert not (tmp_path / "gpu" / "metrics.jsonl").exists()


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cpu:0", "CUDA"])
def test_a_malformed_device_is_a_scenario_error(tmp_path, tiny_scenario, capsys, device):
    code, err = _run(tmp_path, tiny_scenario, "bad", device, capsys)
    assert code == 2 and err.count("\n") == 1 and "device" in err


def test_flower_client_processes_reserve_a_gpu_share_only_on_a_gpu(tiny_scenario):
    """Ray hides the GPUs from a client process that reserved none: on a GPU the runtime is asked for
    each client's share (the scenario's, else a quarter), on the CPU for nothing."""
    from fedgc.flower.runtime.flower_engine import federation_config
    from fedgc.scenario.model import ScenarioError, validate

    flower = validate({**tiny_scenario, "engine": "flower"})
    assert federation_config(flower, torch.device("cpu")) == ["num-supernodes=4"]
    assert federation_config(flower, torch.device("cuda", 0)) == ["num-supernodes=4", "client-resources-num-gpus=0.25"]
    shared = validate({**tiny_scenario, "engine": "flower", "client": {"gpu_share": 0.5}})
    assert federation_config(shared, torch.device("cuda", 0))[1] == "client-resources-num-gpus=0.5"
    with pytest.raises(ScenarioError, match=r"^client\.gpu_share: only applies to engine: flower"):
        validate({**tiny_scenario, "client": {"gpu_share": 0.5}})


def test_flower_accepts_the_gpu_share_items():
    """The items are what ``flwr run --federation-config`` turns into its simulation config."""
    from flwr.common.config import parse_config_args
    from flwr.supercore.utils import simulation_config_from_json

    items = ["num-supernodes=4", "client-resources-num-gpus=0.25"]
    parsed = {k.replace("-", "_"): v for k, v in parse_config_args(items).items()}  # as flwr run does
    config = simulation_config_from_json(parsed)
    assert config.num_supernodes == 4 and config.client_resources_num_gpus == pytest.approx(0.25)
