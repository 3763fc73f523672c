"""Scenario inputs that used to crash (OverflowError, a 7 TiB allocation), hang, run to "completed"
while training nothing, or mean something else than they say (YAML 1.1's ``010`` = 8, ``1:30`` = 90,
duplicate keys). Each is now a one-line error naming the field and the rule, or means what it says.
"""

from __future__ import annotations

import math
import resource
import time
from pathlib import Path

import numpy as np
import pytest
import simpy
import yaml
from pydantic import ValidationError

from fedgc.cli.run import main
from fedgc.data import DataFileError, load_federated
from fedgc.data.config import DataConfig
from fedgc.network.build import build_network
from fedgc.network.config import NetworkConfig
from fedgc.network.piecewise import PeriodicRate
from fedgc.network.traces import MAHIMAHI_PACKET_BITS, read_mahimahi
from fedgc.scenario.model import ScenarioError, dump_scenario, load_scenario, load_tree, parse_override, validate


def _write(tmp_path: Path, tree_or_text, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(tree_or_text if isinstance(tree_or_text, str) else yaml.safe_dump(tree_or_text))
    return path


def _cli_error(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0].removeprefix("error: ")


def _float_leaves(node, prefix=""):
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _float_leaves(value, path + ".")
        elif isinstance(value, float):
            yield path


def _set(tree: dict, dotted: str, value) -> dict:
    *parents, last = dotted.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return tree


# 1. Non-finite numbers --------------------------------------------------------------------------

def test_every_float_key_rejects_inf_and_nan_naming_the_key(tiny_scenario):
    full = validate(tiny_scenario).model_dump(mode="json")
    keys = list(_float_leaves(full))
    assert {"network.over_selection", "network.jitter_ms", "client.lr", "compression.density"} <= set(keys)
    for key in keys:
        for bad in (math.inf, -math.inf, math.nan):
            with pytest.raises(ScenarioError) as err:
                validate(_set(yaml.safe_load(yaml.safe_dump(full)), key, bad))
            assert str(err.value).startswith(f"{key}: must be a finite number"), (key, str(err.value))


@pytest.mark.parametrize("key", ["network.over_selection", "network.jitter_ms", "network.rtt_ms",
                                 "network.mean_off_s", "network.deadline_s"])
def test_cli_refuses_infinity_with_one_line(tmp_path, capsys, tiny_scenario, key):
    message = _cli_error(capsys, [str(_write(tmp_path, tiny_scenario)), "--check", "--set", f"{key}=.inf"])
    assert message.startswith(f"{key}: must be a finite number")


def test_section_models_refuse_non_finite_values_themselves():
    with pytest.raises(ValidationError):
        NetworkConfig(jitter_ms=math.inf)
    with pytest.raises(ValidationError):
        DataConfig(alpha=math.nan)


# 2. Trace memory follows the file, not the time span it names -------------------------------------

def _per_millisecond(path: Path) -> PeriodicRate:
    """The reference model: one bin per millisecond (what the reader used to allocate)."""
    stamps = np.array(path.read_text().split(), dtype=float)
    period = int(stamps.max())
    counts = np.bincount(stamps.astype(np.int64) % period, minlength=period)
    return PeriodicRate(np.arange(period + 1) * 1e-3, counts * (MAHIMAHI_PACKET_BITS / 1e-3), str(path))


def test_a_one_line_trace_naming_31_years_costs_nothing(tmp_path):
    path = tmp_path / "huge.down"
    path.write_text("1000000000000\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    curve = read_mahimahi(path)
    assert time.perf_counter() - start < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB
    assert curve.period == 1e9 and len(curve._times) == 3
    assert curve.mean_bps == pytest.approx(MAHIMAHI_PACKET_BITS / 1e9)


def test_run_length_trace_is_the_per_millisecond_model_exactly(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "t.up"
    stamps = np.sort(np.concatenate([rng.integers(0, 3000, 2000), [0, 0, 5, 6, 7, 7, 3000]]))
    path.write_text("\n".join(map(str, stamps)) + "\n")
    new, ref = read_mahimahi(path), _per_millisecond(path)
    assert (new._times, new._rates, new._cum) == (ref._times, ref._rates, ref._cum)
    for start, nbytes in [(0.0, 1500), (0.0123, 10**6), (2.9995, 7 * 10**5), (1234.5, 3 * 10**7)]:
        assert new.duration(start, nbytes * 8.0) == ref.duration(start, nbytes * 8.0)


def test_check_with_a_huge_one_line_trace_is_quick(tmp_path, capsys, tiny_scenario):
    (tmp_path / "huge.down").write_text("1000000000000\n")
    tiny_scenario["network"] = {"link": "trace", "trace_format": "mahimahi", "trace_down": ["huge.down"]}
    capsys.readouterr()
    start = time.perf_counter()
    assert main([str(_write(tmp_path, tiny_scenario)), "--check"]) == 0
    assert time.perf_counter() - start < 20


def test_trace_timestamps_beyond_float_precision_are_refused(tmp_path):
    path = tmp_path / "t.down"
    path.write_text(f"{2**60}\n")
    with pytest.raises(ValueError, match="at most"):
        read_mahimahi(path)


# 3. Inputs that would complete while training nothing ------------------------------------------

def test_min_clients_above_what_a_round_keeps_is_refused(tiny_scenario):
    with pytest.raises(ScenarioError, match=r"^strategy\.min_clients: 5 is more than the 4 update"):
        validate({**tiny_scenario, "strategy": {"fraction": 1.0, "min_clients": 5}})
    with pytest.raises(ScenarioError, match=r"^strategy\.min_clients: 3 is more than the 2 update"):
        validate({**tiny_scenario, "strategy": {"fraction": 0.5, "min_clients": 3}})
    assert validate({**tiny_scenario, "strategy": {"fraction": 0.5, "min_clients": 2}}).strategy.min_clients == 2


def test_an_availability_file_of_empty_intervals_is_refused(tmp_path):
    (tmp_path / "a.csv").write_text("client,start_s,end_s\n0,10,10\n1,0,0\n")
    config = NetworkConfig(availability="trace", availability_file=str(tmp_path / "a.csv"))
    with pytest.raises(ValueError, match="every interval is empty"):
        build_network(simpy.Environment(), config, [1, 2], np.random.default_rng(0))


def test_unreachable_link_delays_are_refused(tiny_scenario):
    for key, value in [("rtt_ms", 1e12), ("jitter_ms", 1e12), ("over_selection", 1e300)]:
        with pytest.raises(ScenarioError, match=rf"^network\.{key}: Input should be less than or equal"):
            validate({**tiny_scenario, "network": {key: value}})
    with pytest.raises(ScenarioError, match=r"^network\.availability\.mean_off_s: Input should be less than or equal"):
        validate({**tiny_scenario, "network": {"availability": "exponential", "mean_off_s": 1e300}})


# 4. Knobs whose cost grows with their value ----------------------------------------------------

@pytest.mark.parametrize("key, value, rule", [
    ("client.local_steps", 1e18, "valid integer"),
    ("client.local_steps", 10**18, "less than or equal to 10000"),
    ("client.epochs", 1e9, "less than or equal to 100"),
    ("client.batch_size", 10**12, "less than or equal to 65536"),
    ("data.num_clients", 1_000_000, "less than or equal to 10000"),
])
def test_costly_knobs_are_bounded(tiny_scenario, key, value, rule):
    with pytest.raises(ScenarioError) as err:
        validate(_set(tiny_scenario, key, value))
    assert str(err.value).startswith(f"{key}: ") and rule in str(err.value)


def test_synthetic_clients_are_bounded_since_their_data_grows_with_them(tiny_scenario):
    tiny_scenario["data"] = {"dataset": "synthetic", "num_clients": 5000}
    with pytest.raises(ScenarioError, match=r"^data\.num_clients: at most 1,000 for dataset synthetic"):
        validate(tiny_scenario)


# 5. Errors name the right thing ----------------------------------------------------------------

def test_device_file_scale_error_names_the_scale(tmp_path):
    (tmp_path / "cap.csv").write_text("computation_ms_per_sample,dl_kbps,ul_kbps\n1e-305,100,100\n")
    config = NetworkConfig(device_file=str(tmp_path / "cap.csv"), device_file_scale=0.001)
    with pytest.raises(ValueError, match=r"^network\.device\.scale: 0\.001 x computation_ms_per_sample"):
        build_network(simpy.Environment(), config, [1], np.random.default_rng(0))


def test_a_data_root_that_is_a_file_says_so(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(DataFileError, match="is a file, not a directory"):
        load_federated(DataConfig(dataset="mnist", root=str(tmp_path / "f")), 0)
    with pytest.raises(DataFileError, match="is a file, not a directory"):
        load_federated(DataConfig(dataset="shakespeare", root=str(tmp_path / "f"), partition="natural"), 0)


@pytest.mark.parametrize("dataset", ["digits", "synthetic", "hf:ylecun/mnist"])
def test_a_data_root_the_dataset_would_ignore_is_refused(tiny_scenario, tmp_path, dataset):
    tiny_scenario["data"] = {"dataset": dataset, "root": str(tmp_path)}
    with pytest.raises(ScenarioError, match=rf"^data\.root: dataset '{dataset}' reads no files"):
        validate(tiny_scenario)


# 6. YAML 1.2 -----------------------------------------------------------------------------------

BASE_TEXT = "name: y\nrounds: {rounds}\ndata: {{dataset: digits, num_clients: 4}}\nmodel: {{name: mlp}}\n"


def test_yaml_integers_are_decimal_and_yes_and_sexagesimal_are_strings(tmp_path):
    assert load_scenario(_write(tmp_path, BASE_TEXT.format(rounds="010"))).rounds == 10
    assert load_scenario(_write(tmp_path, BASE_TEXT.format(rounds="010")), ["rounds=011"]).rounds == 11
    for rounds, rule in [("true", "valid integer"), ("yes", "valid integer"), ("1:30", "valid integer"),
                         ("2.0", "valid integer")]:
        with pytest.raises(ScenarioError, match=rf"^rounds: .*{rule}"):
            load_scenario(_write(tmp_path, BASE_TEXT.format(rounds=rounds)))
        with pytest.raises(ScenarioError, match=rf"^rounds: .*{rule}"):
            load_scenario(_write(tmp_path, BASE_TEXT.format(rounds=3)), [f"rounds={rounds}"])
    with pytest.raises(ScenarioError, match=r"^network\.deadline_s: Input should be a valid number"):
        load_scenario(_write(tmp_path, BASE_TEXT.format(rounds=3)), ["network.deadline_s=1:30"])
    assert parse_override("compression.density=1e-3") == ("compression.density", 0.001)
    assert parse_override("name=on") == ("name", "on")


def test_duplicate_keys_are_refused_naming_the_key_and_line(tmp_path, capsys):
    text = BASE_TEXT.format(rounds=3) + "client:\n  lr: 0.1\n  lr: 0.2\n"
    with pytest.raises(ScenarioError, match=r"duplicate key 'lr' at line 7"):
        load_tree(_write(tmp_path, text))
    message = _cli_error(capsys, [str(_write(tmp_path, "rounds: 2\n" + BASE_TEXT.format(rounds=3))), "--check"])
    assert "duplicate key 'rounds' at line 3" in message
    with pytest.raises(ScenarioError, match=r"^--set model\.options: duplicate key 'a'"):
        parse_override("model.options={a: 1, a: 2}")


@pytest.mark.parametrize("name", ["yes", "1e3", "010", "on", "1_000", "null"])
def test_the_dumped_scenario_reads_back_the_same(tiny_scenario, name):
    scenario = validate({**tiny_scenario, "name": name})
    text = dump_scenario(scenario)
    assert validate(yaml.safe_load(text)) == scenario  # PyYAML's YAML 1.1 reader agrees
    assert load_tree_from_text(text) == scenario.model_dump(mode="json")


def load_tree_from_text(text: str) -> dict:
    from fedgc.scenario.yaml12 import load

    return load(text)


# 7. Paths resolve against the scenario file, and runs hold absolute paths -----------------------

def _trace_scenario(tiny_scenario: dict, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "link.down").write_text("\n".join(str(t) for t in range(1, 200, 3)) + "\n")
    (folder / "avail.csv").write_text("client,start_s,end_s\n0,0,100000\n")
    tiny_scenario["network"] = {"link": "trace", "trace_format": "mahimahi", "trace_down": ["link.down"],
                                "availability": "trace", "availability_file": "avail.csv"}
    return tiny_scenario


def test_relative_paths_are_relative_to_the_scenario_file(tmp_path, monkeypatch, capsys, tiny_scenario):
    here = tmp_path / "exp"
    path = _write(here, _trace_scenario(tiny_scenario, here))
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    scenario = load_scenario(path)
    assert scenario.network.link.down == [str(here / "link.down")]
    assert scenario.network.availability.file == str(here / "avail.csv")
    capsys.readouterr()
    assert main([str(path), "--check"]) == 0
    # The copy a run writes (and --resume reads) finds the same files from anywhere.
    run = tmp_path / "run"
    run.mkdir()
    (run / "scenario.yaml").write_text(dump_scenario(scenario))
    monkeypatch.chdir(run)
    assert load_scenario(run / "scenario.yaml") == scenario


def test_set_paths_are_relative_to_the_current_directory(tmp_path, monkeypatch, tiny_scenario):
    here = tmp_path / "exp"
    path = _write(here, _trace_scenario(tiny_scenario, here))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "avail.csv").write_text("client,start_s,end_s\n0,0,5\n")
    monkeypatch.chdir(tmp_path)
    scenario = load_scenario(path, ["network.availability_file=other/avail.csv"])
    assert scenario.network.availability.file == str(tmp_path / "other" / "avail.csv")
    assert scenario.network.link.down == [str(here / "link.down")]


def test_environment_variables_in_paths(tmp_path, monkeypatch, tiny_scenario):
    here = tmp_path / "exp"
    tree = _trace_scenario(tiny_scenario, here)
    tree["network"]["trace_dir"] = "${FEDGC_TEST_DIR:-.}"
    path = _write(here, tree)
    monkeypatch.delenv("FEDGC_TEST_DIR", raising=False)
    assert load_scenario(path).network.trace_dir == str(here)
    monkeypatch.setenv("FEDGC_TEST_DIR", str(tmp_path))
    with pytest.raises(ScenarioError, match=r"^network: file .*link.down: no such file"):
        load_scenario(path)  # the variable wins over the default
    tree["network"]["trace_dir"] = "${FEDGC_UNSET_FOR_TEST}/x"
    with pytest.raises(ScenarioError, match=r"^network\.trace_dir: environment variable FEDGC_UNSET_FOR_TEST is not set"):
        load_scenario(_write(here, tree))


def test_yaml_1_2_core_schema_scalars():
    from fedgc.scenario.yaml12 import load

    text = ("a: 010\nb: 0o17\nc: 0x1F\nd: 1:30\ne: yes\nf: TRUE\ng: ~\nh: 2024-01-01\ni: 1_000\nj: 1e-3\n"
            "k: .5\nl: -.inf\nm: off\n")
    assert load(text) == {"a": 10, "b": 15, "c": 31, "d": "1:30", "e": "yes", "f": True, "g": None,
                          "h": "2024-01-01", "i": "1_000", "j": 0.001, "k": 0.5, "l": -math.inf, "m": "off"}


def test_an_integer_too_long_to_convert_is_a_one_line_error(tmp_path, capsys):
    digits = "9" * 5000
    assert "invalid YAML at line 2" in _cli_error(capsys, [str(_write(tmp_path, f"name: x\nrounds: {digits}\n"))])
    path = _write(tmp_path, BASE_TEXT.format(rounds=2))
    assert _cli_error(capsys, [str(path), "--check", "--set", f"seed={digits}"]).startswith("seed: ")


def test_resume_from_another_directory_finds_the_files(tmp_path, monkeypatch, capsys, tiny_scenario):
    here = tmp_path / "exp"
    tree = {**_trace_scenario(tiny_scenario, here), "rounds": 2, "checkpoint_every": 1}
    path = _write(here, tree)
    monkeypatch.chdir(tmp_path)
    assert main(["exp/s.yaml", "--out", "run", "--quiet"]) == 0
    rows = (tmp_path / "run" / "metrics.jsonl").read_text()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    capsys.readouterr()
    assert main(["--resume", str(tmp_path / "run"), "--quiet"]) == 0, capsys.readouterr().err
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == rows
    assert str(path.parent / "link.down") in (tmp_path / "run" / "scenario.yaml").read_text()
