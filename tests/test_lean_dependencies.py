"""What running fedgc needs, and no more: the digits ship in the package (no scikit-learn), and
flwr-datasets (with HF ``datasets``, pyarrow and pandas) is the extra ``fedgc[datasets]``, asked for in
one line by what needs it — the ``shards``, ``pathological`` and ``size_skew`` partitioners and
``hf:<id>`` datasets — when a scenario is checked or run, and by the partitioners and the Hub loader
when called.

The packages are hidden for real: each process here runs with a ``sitecustomize`` on its path that puts
a finder first on ``sys.meta_path`` refusing them (``ModuleNotFoundError``, as a missing package gives),
so the fedgc code under test, and every process it starts, cannot import them. tests/test_install.py
installs the wheel beside an environment that lacks them and runs the quickstart there."""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fedgc.data.digits import DIGITS_FILE, digits_arrays
from fedgc.data.optional import INSTALL, PARTITIONS, FlowerDatasetsUnavailable
from fedgc.errors import FedgcError
from tests.conftest import REPO

# What the runtime install no longer holds (the extra's packages, and scikit-learn with SciPy).
HIDDEN = ("flwr_datasets", "datasets", "pyarrow", "pandas", "sklearn", "scipy")

HIDER = textwrap.dedent(f"""\
    import sys

    class HiddenPackages:
        '''The packages of the extra and scikit-learn, as if not installed (tests/test_lean_dependencies.py).'''

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {HIDDEN!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, HiddenPackages())
    """)


@pytest.fixture(scope="module")
def hidden(tmp_path_factory) -> dict[str, str]:
    """The environment of a process (and its children) that cannot import ``HIDDEN``."""
    folder = tmp_path_factory.mktemp("hidden")
    (folder / "sitecustomize.py").write_text(HIDER)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env = {**env, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])}
    # The premise of every test here: each package is hidden (and found hidden), and only those.
    code = ("import importlib\n"
            f"for name in {HIDDEN!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ModuleNotFoundError:\n"
            "        print('hidden', name)\n"
            "import numpy, torch, flwr\n"
            "print('found', numpy.__name__, torch.__name__, flwr.__name__)\n")
    done = _python(env, folder, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [*(f"hidden {n}" for n in HIDDEN), "found numpy torch flwr"]
    return env


def _python(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


# --- the digits, shipped ------------------------------------------------------------------------------

def test_the_digits_are_read_from_the_package_bit_for_bit_as_scikit_learn_loads_them():
    sklearn_datasets = pytest.importorskip(
        "sklearn.datasets", reason="the comparison needs scikit-learn (pip install scikit-learn, or 'fedgc[dev]')")
    bunch = sklearn_datasets.load_digits()
    images, target = digits_arrays()
    assert DIGITS_FILE.is_relative_to(Path(__import__("fedgc").__file__).parent)  # the package's own copy
    for ours, theirs in ((images, bunch.images), (target, bunch.target)):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert ours.tobytes() == theirs.tobytes()  # bit for bit, not merely equal values


def test_the_shipped_file_names_its_source_and_licence_beside_it():
    notice = (DIGITS_FILE.parent / "digits-NOTICE.md").read_text()
    for words in ("Optical Recognition of Handwritten Digits", "UCI Machine Learning Repository",
                  "https://doi.org/10.24432/C50P49", "CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/"):
        assert words in notice
    stored = json.loads(DIGITS_FILE.read_text())
    with gzip.open(io.BytesIO(base64.b64decode(stored["csv_gz_base64"])), "rt") as text:
        rows = text.read().splitlines()
    assert len(rows) == 1797 and {len(r.split(",")) for r in rows} == {65}


def test_a_flower_app_bundle_carries_the_digits_and_their_notice():
    """``flwr run`` packs only some file types into the app bundle a deployed ServerApp runs from (a .gz
    is left out): the digits and their notice are among them, so a deployment reads the same file."""
    from flwr.cli.build import get_filtered_fab_paths

    package = Path(__import__("fedgc").__file__).parent
    names = [(DIGITS_FILE.parent / name).relative_to(package.parent).as_posix()
             for name in (DIGITS_FILE.name, "digits-NOTICE.md")]
    assert get_filtered_fab_paths(dict.fromkeys(names, b""), {}) == names


def test_a_digits_file_that_is_not_the_shipped_one_is_refused_in_one_line(tmp_path):
    from fedgc.data.base import DataFileError

    changed = tmp_path / "digits.json"
    raw = bytearray(DIGITS_FILE.read_bytes())
    raw[-20] ^= 1
    changed.write_bytes(bytes(raw))
    with pytest.raises(DataFileError, match=r"^dataset digits: .* is not the digits file fedgc ships .*reinstall fedgc$"):
        digits_arrays(changed)
    big = tmp_path / "big.json"
    big.write_bytes(DIGITS_FILE.read_bytes() + b" " * 10_000_000)  # read no further than the shipped size
    with pytest.raises(DataFileError, match="is not the digits file"):
        digits_arrays(big)
    with pytest.raises(DataFileError, match=r"^dataset digits: cannot read .*missing.*; reinstall fedgc$"):
        digits_arrays(tmp_path / "missing")


def test_the_quickstart_loads_partitions_and_builds_without_scikit_learn_or_flwr_datasets(hidden, tmp_path):
    done = _python(hidden, tmp_path, "-m", "fedgc", "check", "--deep", "quickstart")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: quickstart: 10 clients, 1438 train samples"), done.stdout


# --- the extra, asked for in one line ------------------------------------------------------------------

NEEDS_THE_EXTRA = [*(("data.partition", p) for p in PARTITIONS), ("data.dataset", "hf:ylecun/mnist")]


@pytest.mark.parametrize(("key", "value"), NEEDS_THE_EXTRA)
def test_fedgc_check_names_the_extra_a_scenario_needs(hidden, tmp_path, key, value):
    done = _python(hidden, tmp_path, "-m", "fedgc", "check", "quickstart", "--set", f"{key}={value}")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"error: {key}: {value} needs flwr-datasets, which is not installed: {INSTALL}\n"


@pytest.mark.slow
def test_fedgc_run_refuses_before_it_starts(hidden, tmp_path):
    done = _python(hidden, tmp_path, "-m", "fedgc", "run", "quickstart", "--set", "data.partition=shards",
                   "--out", "r")
    assert done.returncode == 2
    assert done.stderr == f"error: data.partition: shards needs flwr-datasets, which is not installed: {INSTALL}\n"
    assert list(tmp_path.iterdir()) == []  # no run folder: refused before the run started


def test_the_python_api_refuses_with_a_fedgc_error(hidden, tmp_path):
    code = ("import fedgc\n"
            "try:\n"
            "    fedgc.Scenario.from_yaml('quickstart').with_overrides({'data.partition': 'pathological'})\n"
            "except fedgc.FedgcError as err:\n"
            "    print(type(err).__name__, '|', err)\n")
    done = _python(hidden, tmp_path, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("ScenarioError | data.partition: pathological needs flwr-datasets, which is not "
                           f"installed: {INSTALL}\n")


def test_the_partitioners_and_the_hub_loader_refuse_when_called(hidden, tmp_path):
    """Below the scenario: the functions themselves, called directly, refuse in one line — the Hub
    loader before it asks the Hub anything (the endpoint here answers nothing)."""
    code = textwrap.dedent(f"""\
        import numpy as np
        from fedgc.errors import FedgcError
        from fedgc.data.partition import PARTITIONERS, partition_options
        from fedgc.data.config import DataConfig
        from fedgc.data.hf import HuggingFaceConfig, load_hf

        labels = np.arange(100) % 10
        defaults = DataConfig.model_construct(**{{k: f.default for k, f in DataConfig.model_fields.items()}})
        for name in {PARTITIONS!r}:
            try:
                PARTITIONERS[name](labels, 4, np.random.default_rng(0), **partition_options(name, defaults))
            except FedgcError as err:
                print(type(err).__name__, '|', err)
        try:
            load_hf('hf:ylecun/mnist', HuggingFaceConfig(timeout_s=0.5))
        except FedgcError as err:
            print(type(err).__name__, '|', err)
        for name in ('iid', 'dirichlet'):  # these never needed it
            print(name, len(PARTITIONERS[name](labels, 4, np.random.default_rng(0),
                                               **partition_options(name, defaults))))
        """)
    env = {**hidden, "HF_ENDPOINT": "http://127.0.0.1:9"}
    done = _python(env, tmp_path, "-c", code)
    assert done.returncode == 0, done.stderr
    lines = [f"FlowerDatasetsUnavailable | data.partition: {p} needs flwr-datasets, which is not installed: {INSTALL}"
             for p in PARTITIONS]
    lines.append(f"FlowerDatasetsUnavailable | data.dataset: hf:ylecun/mnist needs flwr-datasets, which is not "
                 f"installed: {INSTALL}")
    assert done.stdout.splitlines() == [*lines, "iid 4", "dirichlet 4"]
    assert issubclass(FlowerDatasetsUnavailable, FedgcError) and issubclass(FlowerDatasetsUnavailable, ValueError)

    # Where the extra is installed (as here, outside the hiding process) the same calls partition.
    pytest.importorskip("flwr_datasets", reason="needs the extra: pip install 'fedgc[datasets]'")
    from fedgc.data.config import DataConfig
    from fedgc.data.partition import PARTITIONERS, partition_options

    defaults = DataConfig()
    for name in PARTITIONS:
        assert len(PARTITIONERS[name](np.arange(100) % 10, 4, np.random.default_rng(0),
                                      **partition_options(name, defaults))) == 4
        assert DataConfig(partition=name).partition == name
    assert DataConfig(dataset="hf:ylecun/mnist").dataset == "hf:ylecun/mnist"
