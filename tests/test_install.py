"""fedgc as an installable package: the wheel ``pip wheel .`` builds holds the built-in scenarios, the
licence and metadata a package index accepts; installed into a fresh virtual environment, its ``fedgc``
command runs and checks a built-in scenario from an empty folder, with nothing of the checkout on
``sys.path``.

Offline and honest about it: the wheel is built without build isolation (with this environment's
setuptools, which pyproject.toml's build requirement must be met by) from a copy of the sources, so
the build's ``build/`` and ``*.egg-info`` stay out of the checkout. The fresh environment gets only the
wheel (``--no-deps``); its dependencies (PyTorch, Flower...) are those already installed in this one,
put on its path by a ``.pth`` file, as a path entry only: this environment's editable install of fedgc
(a ``.pth`` hook of its own) is not run there, and the test checks that ``fedgc`` is imported from the
new environment. A second, lean environment gets this one's packages less what the runtime install no
longer holds (flwr-datasets and what it brings, scikit-learn, SciPy): the quickstart runs there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.metadata import Metadata, RawMetadata, parse_email
from packaging.version import Version

from fedgc.scenario.builtin import description
from tests.conftest import REPO

pytestmark = pytest.mark.slow

# What setuptools builds the wheel from (pyproject.toml: the package, its data, the readme and the licence).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "fedgc", "scenarios")
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
NOTICE = "fedgc/data/files/digits-NOTICE.md"
DIGITS_FILES = ("fedgc/data/files/digits.json", NOTICE)


def _setuptools_meets_the_build_requirement() -> bool:
    required = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    minimum = next(r.split(">=")[1] for r in required if r.startswith("setuptools>="))
    try:
        return Version(version("setuptools")) >= Version(minimum)
    except PackageNotFoundError:
        return False


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if not _setuptools_meets_the_build_requirement():
        pytest.skip("building the wheel offline needs this environment's setuptools to meet pyproject.toml's "
                    "build requirement")
    work = tmp_path_factory.mktemp("build")
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():  # symlinks=True: fedgc/scenarios stays the link to ../scenarios it is here
            shutil.copytree(REPO / name, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, src / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                            "--no-index", "--quiet", "-w", str(work / "dist")],
                           capture_output=True, text=True, timeout=600, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    (found,) = (work / "dist").glob("fedgc-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment holding the wheel; returns its ``bin`` folder."""
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    return _fresh_environment(wheel, tmp_path_factory.mktemp("venv") / "env", sorted(ours))


# What the runtime install no longer holds: flwr-datasets and what it brings (the extra fedgc[datasets]),
# scikit-learn and SciPy. Matched against the first word of a site-packages entry's name, so the packages'
# own folders, their .libs and their .dist-info all go.
NOT_IN_THE_RUNTIME = ("flwr_datasets", "datasets", "pyarrow", "pandas", "sklearn", "scikit_learn", "scipy")


@pytest.fixture(scope="module")
def lean(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment holding the wheel beside this one's packages less ``NOT_IN_THE_RUNTIME``:
    a folder of links to every other entry of this environment's site-packages is its path entry."""
    folder = tmp_path_factory.mktemp("lean-site-packages")
    for site in sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}):
        for entry in Path(site).iterdir():
            first = entry.name.replace("-", ".").split(".")[0].lower()
            if first not in NOT_IN_THE_RUNTIME and first != "fedgc" and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry)
    return _fresh_environment(wheel, tmp_path_factory.mktemp("lean-venv") / "env", [str(folder)])


def _fresh_environment(wheel: Path, venv: Path, path_entries: list[str]) -> Path:
    """A new virtual environment at ``venv`` holding only the wheel, ``path_entries`` on its path (by a
    ``.pth`` file: entries only, whose own ``.pth`` files are not run); returns its ``bin`` folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", "--quiet", str(wheel)], capture_output=True, text=True, timeout=600,
                             check=False)
    assert install.returncode == 0, install.stderr[-3000:]
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(purelib) / "fedgc-test-dependencies.pth").write_text("".join(f"{p}\n" for p in path_entries))
    return venv / "bin"


def _in_empty_folder(bin_dir: Path, folder: Path, *args: str, env: dict[str, str] | None = None):
    """``args`` run from ``folder`` as in the new environment activated: its ``bin`` first on ``PATH``."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    clean["PATH"] = os.pathsep.join([str(bin_dir), clean.get("PATH", os.defpath)])
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=folder, capture_output=True, text=True,
                          timeout=600, check=False, env={**clean, **(env or {})})


def test_the_wheel_holds_the_scenarios_the_licence_and_metadata_an_index_accepts(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for path in sorted((REPO / "scenarios").glob("*.yaml")):
            assert archive.read(f"fedgc/scenarios/{path.name}") == path.read_bytes()
        info = f"fedgc-{PROJECT['version']}.dist-info"
        assert archive.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
        for name in DIGITS_FILES:  # dataset digits without scikit-learn, its notice in the package and the licences
            assert archive.read(name) == (REPO / name).read_bytes()
        assert archive.read(f"{info}/licenses/{NOTICE}") == (REPO / NOTICE).read_bytes()
        raw = archive.read(f"{info}/METADATA")
    assert not [n for n in names if n.startswith(("tests/", "scenarios/", "bench/"))]
    metadata = Metadata.from_raw(_raw(raw), validate=True)
    assert metadata.name == "fedgc" and str(metadata.version) == PROJECT["version"]
    assert metadata.license_expression == "Apache-2.0 AND CC-BY-4.0"  # the code; the digits' data
    assert metadata.license_files == ["LICENSE", NOTICE]
    assert str(metadata.requires_python) == PROJECT["requires-python"]
    assert metadata.description_content_type == "text/markdown" and metadata.description.startswith("# fedgc")
    assert metadata.classifiers == PROJECT["classifiers"] and metadata.summary == PROJECT["description"]
    assert not [c for c in metadata.classifiers if c.startswith("License ::")]  # PEP 639: the expression only


def test_the_runtime_requirements_are_what_running_needs_and_flwr_datasets_is_an_extra(wheel):
    with zipfile.ZipFile(wheel) as archive:
        metadata = Metadata.from_raw(_raw(archive.read(f"fedgc-{PROJECT['version']}.dist-info/METADATA")))
    runtime = {r.name for r in metadata.requires_dist or [] if r.marker is None}
    assert runtime == {"flwr", "torch", "numpy", "simpy", "pyyaml", "pydantic", "matplotlib", "tqdm", "tomli-w", "httpx",
                       "zlib-ng"}
    extra = [r for r in metadata.requires_dist or [] if r.marker is not None and r.marker.evaluate({"extra": "datasets"})]
    assert [r.name for r in extra] == ["flwr-datasets"] and "datasets" in (metadata.provides_extra or [])


def _raw(raw: bytes) -> RawMetadata:
    parsed, unparsed = parse_email(raw)
    assert not unparsed, unparsed  # every field is one the core metadata specification knows
    return parsed


def test_the_installed_command_runs_a_built_in_scenario_from_an_empty_folder(installed, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    where = _in_empty_folder(installed, folder, "python", "-c",
                             "import fedgc, sys; print(fedgc.__file__); print(fedgc.__version__); "
                             "print(any(p.rstrip('/') == sys.argv[1] for p in sys.path))", str(REPO))
    module, shown, checkout_on_path = where.stdout.split()
    assert Path(module).is_relative_to(installed.parent) and checkout_on_path == "False", where.stderr
    assert shown == PROJECT["version"]
    assert _in_empty_folder(installed, folder, "fedgc", "--version").stdout == f"fedgc {PROJECT['version']}\n"

    listed = _in_empty_folder(installed, folder, "fedgc", "scenarios")
    assert listed.returncode == 0 and any(row.split()[:1] == ["quickstart"] for row in listed.stdout.splitlines())

    run = _in_empty_folder(installed, folder, "fedgc", "run", "quickstart", "--set", "rounds=2", "--out", "r",
                           "--quiet")
    assert run.returncode == 0, run.stderr
    summary = json.loads((folder / "r" / "summary.json").read_text())
    assert summary["rounds"] == 2 and (folder / "r" / "model.pt").is_file()
    check = _in_empty_folder(installed, folder, "fedgc", "check", "quickstart")
    assert check.returncode == 0 and check.stdout.startswith("ok: "), check.stderr

    copied = _in_empty_folder(installed, folder, "fedgc", "scenarios", "copy", "quickstart")
    assert copied.returncode == 0 and (folder / "quickstart.yaml").read_bytes() == \
        (REPO / "scenarios" / "quickstart.yaml").read_bytes()
    assert sorted(p.name for p in folder.iterdir()) == ["quickstart.yaml", "r"]


NEEDS_DATA = sorted(p.stem for p in (REPO / "scenarios").glob("*.yaml") if "${FEDGC_" in p.read_text())


@pytest.mark.parametrize("name", NEEDS_DATA)
def test_a_built_in_that_needs_downloaded_data_says_so_in_one_line(installed, tmp_path, name):
    check = _in_empty_folder(installed, tmp_path, "fedgc", "check", name,
                             env={"FEDGC_DATA_DIR": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)})
    assert check.returncode == 2 and check.stderr.count("\n") == 1, check.stderr
    # the command as the user types it: `fedgc` on PATH is this environment's (fedgc.invocation)
    assert check.stderr.startswith("error: ") and "; get it with: fedgc fetch " in check.stderr
    item = check.stderr.rsplit("fedgc fetch ", 1)[1].split()[0]
    needs = description(name).rsplit("needs `fedgc fetch ", 1)[1].split("`")[0].split()
    assert item in needs, (item, needs)  # what `fedgc scenarios` says it needs


def test_the_runtime_install_runs_the_quickstart_and_names_the_extra_a_scenario_needs(lean, tmp_path):
    """Installed without flwr-datasets (HF datasets, pyarrow, pandas), scikit-learn and SciPy: the
    quickstart runs from an empty folder; a built-in that partitions with flwr-datasets is refused by
    ``fedgc check`` in one line that says what to install."""
    absent = _in_empty_folder(lean, tmp_path, "python", "-c",
                              "import importlib.util as u; "
                              f"print([n for n in {NOT_IN_THE_RUNTIME!r} if u.find_spec(n)])")
    assert absent.stdout == "[]\n", absent.stderr
    run = _in_empty_folder(lean, tmp_path, "fedgc", "run", "quickstart", "--set", "rounds=2", "--out", "r", "--quiet")
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["rounds"] == 2
    check = _in_empty_folder(lean, tmp_path, "fedgc", "check", "fedavg_mnist_cnn")  # data.partition: shards
    assert check.returncode == 2
    assert check.stderr == ("error: data.partition: shards needs flwr-datasets, which is not installed: "
                            "pip install 'fedgc[datasets]'\n")
