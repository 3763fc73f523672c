"""Every malformed scenario ends in exit code 2 and one line that names what is wrong: never a
traceback, never a hang. Hypothesis mutates valid scenarios (wrong types, out-of-range and absurd
values, non-finite numbers, unknown and missing keys, sections replaced by scalars, bad file paths),
writes raw garbage files, and writes the base scenario as text with YAML 1.1 forms (``010``,
``1:30``, ``yes``, ``0x10``, ``.inf``) and duplicate keys spliced in; each case goes through the real
CLI with ``--check`` (everything is loaded and built, nothing is trained). 600 cases per run, seeded,
so CI sees the same cases every time."""

from __future__ import annotations

import copy
import signal
import string

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgc.cli.run import main
from tests.conftest import REPO, shared_dir

CASES = 500
TEXT_CASES = 100
PER_CASE_LIMIT_S = 20  # a case that takes longer than this is a hang

BASE = {
    "name": "fuzz", "seed": 3, "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "dirichlet", "alpha": 0.5},
    "model": {"name": "mlp", "options": {}},
    "client": {"local_steps": 2, "batch_size": 16, "lr": 0.1, "momentum": 0.0},
    "compression": {"name": "dgc", "density": 0.01, "warmup_rounds": 2, "clip_norm": 1.0},
    "strategy": {"fraction": 0.5, "server_optimizer": "momentum", "server_lr": 1.0},
    "network": {"profile": "3g", "link": "gilbert_elliott", "availability": "exponential", "deadline_s": 60.0},
    "eval": {"target_accuracy": 0.8, "every": 1},
    "checkpoint_every": 1,
}

TRACES = shared_dir() / "traces"
PATH_VALUES = ["", ".", "/", "/dev/null", "/nonexistent/file", str(REPO / "scenarios"), str(REPO / "README.md"),
               str(REPO / "pyproject.toml"), "${FEDGC_FUZZ_UNSET}/x", "${FEDGC_FUZZ_UNSET:-/dev/null}", "${", "$x",
               "~/nonexistent", "relative/nonexistent.csv",
               str(TRACES / "mahimahi" / "ATT-LTE-driving-2016.up"),
               str(TRACES / "fedscale" / "client_device_capacity_ul_dl.csv"), "\x00bad"]
PATH_KEYS = ["network.trace_down", "network.trace_up", "network.bandwidth_file", "network.device_file",
             "network.availability_file", "network.trace_dir", "data.root"]
NAME_VALUES = ["mnist", "femnist", "shakespeare", "synthetic", "hf:nonexistent/dataset", "lte", "5g", "wifi",
               "trace", "constant", "topk", "signsgd", "powersgd", "qsgd", "adam", "sgd", "resnet20", "char_lstm",
               "natural", "shards", "pathological", "size_skew", "iid", "trace", "mahimahi", "lumos"]


def _leaves(tree: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        out.append(path)
        if isinstance(value, dict):
            out.extend(_leaves(value, path + "."))
    return out


def _set(tree: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    node = tree
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value


def _delete(tree: dict, path: str) -> None:
    *parents, last = path.split(".")
    node = tree
    for part in parents:
        node = node.get(part)
        if not isinstance(node, dict):
            return
    node.pop(last, None)


ODD_VALUES = st.one_of(
    st.none(), st.booleans(),
    st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 1, 2**31, 2**63, 10**9]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e-300, 1e300, 0.5, 1.0000001]),
    st.text(string.printable, max_size=12), st.sampled_from(NAME_VALUES), st.sampled_from(PATH_VALUES),
    st.lists(st.sampled_from([1, "a", None, 0.5, *PATH_VALUES[3:15]]), max_size=3),
    st.dictionaries(st.sampled_from(["x", "name", "up_mbps", "hidden"]), st.integers(-5, 5), max_size=2),
)


@st.composite
def mutated_tree(draw) -> dict:
    tree = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 4))):
        leaves = _leaves(tree)
        action = draw(st.sampled_from(["set", "set", "set", "path", "delete", "unknown"]))
        if action == "set" and leaves:
            _set(tree, draw(st.sampled_from(leaves)), draw(ODD_VALUES))
        elif action == "path":
            key = draw(st.sampled_from(PATH_KEYS))
            value = draw(st.sampled_from(PATH_VALUES))
            _set(tree, key, [value] if key.endswith(("trace_down", "trace_up")) else value)
            if key.startswith("network.trace"):
                _set(tree, "network.link", "trace")
            if key == "network.availability_file":
                _set(tree, "network.availability", "trace")
        elif action == "delete" and leaves:
            _delete(tree, draw(st.sampled_from(leaves)))
        else:
            section = draw(st.sampled_from(["", "data.", "network.", "compression.", "model.options."]))
            _set(tree, section + draw(st.text(string.ascii_lowercase + "_", min_size=1, max_size=8)), 1)
    return tree


RAW_FILES = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=64),
    st.sampled_from(["", "   \n", "- a\n- b\n", "just a string", "{", "name: [unclosed", "rounds: !!python/object:os.system x",
                     "\t- tab", "name: x\nname: y\n", "? complex key\n: v\n", "*alias", "%YAML 9.9\n---\nx: 1"]),
)


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"a scenario took longer than {PER_CASE_LIMIT_S} s")


def _run_check(tmp_path, content: bytes, capsys) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(content)
    capsys.readouterr()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(PER_CASE_LIMIT_S)
    try:
        code = main([str(path), "--check"])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    captured = capsys.readouterr()
    assert code in (0, 2), f"exit {code}: {captured.err[-400:]}"
    if code == 2:
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), captured.err[-400:]
        assert "Traceback" not in captured.err


FUZZ_SETTINGS = settings(max_examples=CASES // 2, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(HealthCheck))


@pytest.mark.slow
@FUZZ_SETTINGS
@given(tree=mutated_tree())
def test_mutated_scenarios_exit_0_or_2_with_one_line(tmp_path_factory, capsys, tree):
    _run_check(tmp_path_factory.mktemp("fuzz"), yaml.safe_dump(tree, allow_unicode=True).encode(), capsys)


@FUZZ_SETTINGS
@given(content=RAW_FILES)
def test_garbage_files_exit_2_with_one_line(tmp_path_factory, capsys, content):
    data = content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
    _run_check(tmp_path_factory.mktemp("raw"), data, capsys)


# YAML 1.1 spellings (octal, sexagesimal, yes/no, hex, underscores, dates) and non-finite floats:
# read as YAML 1.2 they are a plain number or a string, never octal 8 or sexagesimal 90.
YAML_FORMS = ["010", "0o10", "0x10", "1:30", "1:30:00", "yes", "no", "on", "off", "y", "True", "FALSE", "~",
              "1_000", "2024-01-01", ".inf", "-.inf", ".nan", ".NaN", "+.5", "1e3", "1E-3", "-0", "0.", "1e400"]


@st.composite
def yaml_text(draw) -> str:
    """The base scenario as text, one leaf's value replaced by a YAML form, maybe a key repeated."""
    lines = yaml.safe_dump(BASE, sort_keys=False).splitlines()
    leaf_lines = [i for i, line in enumerate(lines) if ": " in line]
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.sampled_from(leaf_lines))
        key = lines[i].split(": ", 1)[0]
        if draw(st.booleans()):
            lines[i] = f"{key}: {draw(st.sampled_from(YAML_FORMS))}"
        else:
            lines.insert(i + 1, f"{key}: {draw(st.sampled_from(YAML_FORMS))}")  # a duplicate key
    return "\n".join(lines) + "\n"


@settings(max_examples=TEXT_CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(text=yaml_text())
def test_yaml_1_1_forms_and_duplicate_keys_exit_0_or_2_with_one_line(tmp_path_factory, capsys, text):
    _run_check(tmp_path_factory.mktemp("text"), text.encode(), capsys)


@pytest.mark.parametrize("line, needle", [
    ("rounds: 010", None),  # YAML 1.2: ten
    ("rounds: 1:30", "rounds: Input should be a valid integer"),
    ("rounds: yes", "rounds: Input should be a valid integer"),
    ("seed: .inf", "seed: must be a finite number"),
    ("name: other", "duplicate key 'name'"),
])
def test_yaml_forms_mean_what_yaml_1_2_says(tmp_path, capsys, line, needle):
    text = yaml.safe_dump(BASE, sort_keys=False)
    key = line.split(":")[0]
    lines = [x for x in text.splitlines() if not (x.startswith(key + ":") and key != "name")] + [line]
    (tmp_path / "s.yaml").write_text("\n".join(lines) + "\n")
    code = main([str(tmp_path / "s.yaml"), "--check"])
    err = capsys.readouterr().err
    if needle is None:
        assert code == 0, err
    else:
        assert code == 2 and needle in err, err


def test_the_base_scenario_is_valid(tmp_path, capsys):
    """The fuzzer starts from a scenario that passes: rejections come from the mutations."""
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(BASE))
    assert main([str(tmp_path / "s.yaml"), "--check"]) == 0
    assert capsys.readouterr().out.startswith("ok: fuzz: 4 clients")


@pytest.mark.parametrize("content, needle", [
    (b"", "empty scenario file"),
    (b"name: [unclosed", "invalid YAML"),
    (b"- a\n- b\n", "mapping"),
    (b"\xff\xfe\x00", "cannot read"),
])
def test_named_file_errors(tmp_path, capsys, content, needle):
    (tmp_path / "s.yaml").write_bytes(content)
    assert main([str(tmp_path / "s.yaml"), "--check"]) == 2
    assert needle in capsys.readouterr().err
