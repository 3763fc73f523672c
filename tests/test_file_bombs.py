"""Files that are bombs: every file fedgc reads is bounded before anything is built from it.

A scenario (or ``--resume``'s ``scenario.yaml``, or a sweep's ``sweep.yaml``) that expands to a
billion values, nests 50,000 levels deep, weighs 30 MB, is a FIFO or ``/dev/zero``; a ``--set`` key
10,000 parts deep; a sweep of 20,000 values; a model of 7.5·10^9 parameters: each is one line on
stderr and exit 2, within seconds, and nothing is allocated for it.
"""

from __future__ import annotations

import os
import time

import pytest
import yaml

from fedgc.cli.run import main

TINY = "name: t\nrounds: 1\ndata: {dataset: digits, num_clients: 2}\nmodel: {name: mlp}\n"
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9))  # 9^10 values


def one_line_error(capsys, argv, within_s: float = 5.0) -> str:
    started = time.monotonic()
    code = main(argv)
    took = time.monotonic() - started
    err = capsys.readouterr().err
    if argv[0] == "--resume":  # a sweep's resume prints its progress lines first
        err = err.splitlines(keepends=True)[-1]
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert took < within_s, f"took {took:.1f} s"
    return err


@pytest.mark.parametrize("text, needle", [
    (TINY + LAUGHS, "more than 100000 values once its aliases are expanded"),
    ("name: " + "[" * 50_000 + "]" * 50_000 + "\n", "nested more than 64 levels deep"),
    ("a: &a [*a]\n" + TINY, "recursive alias"),
    (TINY + "x: [" + ", ".join(f"*a{i}" for i in range(1001)) + "]\n", "invalid YAML"),  # undefined aliases
])
def test_yaml_bombs_in_a_scenario_are_one_line(tmp_path, capsys, text, needle):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    assert needle in one_line_error(capsys, [str(path), "--check"])


def test_many_aliases_are_refused(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(TINY + "y: &y 1\nx: [" + ", ".join(["*y"] * 1001) + "]\n")
    assert "more than 1000 aliases" in one_line_error(capsys, [str(path), "--check"])


def test_a_30_mb_scenario_is_refused_by_its_size(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(TINY + "# " + "x" * (30 * 1024 * 1024) + "\n")
    assert "more than the 1048576 this file may hold" in one_line_error(capsys, [str(path), "--check"])


@pytest.mark.skipif(not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"), reason="POSIX special files")
def test_a_fifo_or_a_device_is_not_read(tmp_path, capsys):
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)  # nobody writes it: opening it for reading in the usual way would block for good
    assert "not a regular file" in one_line_error(capsys, [str(fifo), "--check"])
    assert "not a regular file" in one_line_error(capsys, ["/dev/zero", "--check"])


@pytest.mark.skipif(not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"), reason="POSIX special files")
def test_a_fifo_or_a_device_named_as_a_network_file_is_not_read(tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo")
    for device, section in ((tmp_path / "fifo", "device: {name: file, file: %s}"),
                            ("/dev/zero", "availability: {name: trace, file: %s}")):
        path = tmp_path / "s.yaml"
        path.write_text(TINY + "network: {" + section % device + "}\n")
        assert "not a regular file" in one_line_error(capsys, [str(path), "--check"])


@pytest.mark.skipif(not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"), reason="POSIX special files")
def test_a_device_s_train_npz_that_is_a_fifo_or_dev_zero_is_not_read(tmp_path):
    """A node started with ``data-dir`` whose ``train.npz`` is ``/dev/zero`` or a FIFO: one line, at once."""
    from fedgc.data.base import DataFileError
    from fedgc.data.device_files import load_device_data

    (tmp_path / "zero").mkdir()
    (tmp_path / "zero" / "train.npz").symlink_to("/dev/zero")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "train.npz")
    for folder in ("zero", "fifo"):
        started = time.monotonic()
        with pytest.raises(DataFileError, match="is not a regular file"):
            load_device_data(tmp_path / folder)
        assert time.monotonic() - started < 1


def test_set_with_a_10k_deep_key_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(TINY)
    key = ".".join(["a"] * 10_000)
    assert "at most 8 dotted parts" in one_line_error(capsys, [str(path), "--check", "--set", f"{key}=1"])


def test_a_sweep_of_20000_values_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(TINY)
    values = ",".join(str(i) for i in range(1, 20_001))
    assert "more than 1000 values" in one_line_error(
        capsys, [str(path), "--sweep", f"seed={values}", "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()


def test_a_model_too_large_to_build_is_refused_before_allocation(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(TINY.replace("{name: mlp}", "{name: mlp, options: {hidden: [100000000]}}"))
    err = one_line_error(capsys, [str(path), "--check"], within_s=30)
    assert "model mlp has 7,500,000,010 parameters" in err and "more than the 268,435,456 fedgc builds" in err


def test_resume_of_a_folder_whose_scenario_became_a_bomb_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "scenario.yaml").write_text(TINY + LAUGHS)
    assert "aliases are expanded" in one_line_error(capsys, ["--resume", str(run)])


@pytest.mark.slow
def test_a_sweep_plan_changed_behind_fedgc_s_back_is_refused(tmp_path, capsys):
    """A finished sweep's ``sweep.yaml`` edited (the lr of its points): ``--resume`` refuses it
    instead of reporting runs of two plans as one."""
    path = tmp_path / "s.yaml"
    path.write_text(TINY.replace("rounds: 1", "rounds: 1\nclient: {local_steps: 1, batch_size: 8}"))
    out = tmp_path / "sweep"
    assert main([str(path), "--sweep", "seed=1,2", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    plan = yaml.safe_load((out / "sweep.yaml").read_text())
    plan["scenario"]["client"]["lr"] = 0.5
    (out / "sweep.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    assert "was changed after the sweep started" in one_line_error(capsys, ["--resume", str(out)])
    del plan["digest"]  # the digest removed too: the points' own scenario.yaml still tell
    (out / "sweep.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    assert "differs from the sweep's plan" in one_line_error(capsys, ["--resume", str(out)])


def test_a_device_of_1e300_ms_per_sample_is_refused_at_check(tmp_path, capsys):
    (tmp_path / "devices.csv").write_text("computation_ms_per_sample,dl_kbps,ul_kbps\n1e300,1000,1000\n5,1000,1000\n")
    path = tmp_path / "s.yaml"
    path.write_text(TINY + f"network: {{device: {{name: file, file: {tmp_path / 'devices.csv'}}}}}\n")
    err = one_line_error(capsys, [str(path), "--check"], within_s=30)
    assert "more than network.max_phase_s = 1e+07" in err and "client " in err


def test_clients_first_online_after_1e15_s_are_refused_at_check(tmp_path, capsys):
    (tmp_path / "online.csv").write_text("client,start_s,end_s\n0,1e15,2e15\n1,1e15,2e15\n")
    path = tmp_path / "s.yaml"
    path.write_text(TINY + f"network: {{availability: {{name: trace, file: {tmp_path / 'online.csv'}}}}}\n")
    err = one_line_error(capsys, [str(path), "--check"], within_s=30)
    assert "no client comes online before 1e+15 s" in err
