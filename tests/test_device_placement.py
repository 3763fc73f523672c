"""The scenario's ``device`` (auto | cpu | cuda | cuda:N): where clients train and the server
evaluates. On the CPU it changes nothing (byte-identical metrics); a device the machine lacks is a
one-line error before anything runs, and a malformed one a scenario error."""

from __future__ import annotations

import pytest
import torch
import yaml

from fedgc.simulate import main


def _run(tmp_path, tiny_scenario, name: str, device: str | None, capsys) -> tuple[int, str]:
    tree = {**tiny_scenario, "name": name}
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
