"""Shared fixtures: where the read-only shared data lives, and small fast scenarios."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same cases on every run (CI must be deterministic). To hunt for new
# failing cases locally: HYPOTHESIS_PROFILE=explore pytest ...
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

REPO = Path(__file__).resolve().parents[1]


# Under CI=true a test that skips FAILS (a missing tool, root, iproute2, a JDK, the shared data ...:
# otherwise CI passes with parts of fedgc untested), unless its skip reason matches one of these
# patterns (re.search), each with the reason CI may run without it. The list is printed at the end of
# a CI session, with the skips it let through. Without CI=true a skip stays a skip. .ci/run sets
# CI=true and installs what the skipping tests need (docs/contributing.md, "What CI checks").
TOLERATED_SKIPS: tuple[tuple[str, str], ...] = (
    (r"needs a CUDA GPU", "CI and the development machines have no GPU; the CUDA path is checked where one is"),
    (r"this machine has (CUDA|a GPU)", "a CPU-only check that a machine with a GPU cannot make; CI has no GPU"),
    (r"pid 2 is not the kernel's thread daemon",
     "inside a pid namespace (a container) no kernel thread is visible to name in a run record"),
    (r"Android platform jar / dx not found",
     "the Android jars come only with ../shared/android (its PROVENANCE.md); no fetch command gets them"),
    (r"this CPU has no AVX-512", "the portable and native CPU kernel sets coincide there: nothing to compare"),
)


def ci_mode() -> bool:
    """Whether this session is CI's (``CI=true``, as GitHub's and GitLab's runners and .ci/run set it)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason a skipped report gives, without pytest's ``Skipped: `` prefix."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def tolerated_by(reason: str) -> str | None:
    """The TOLERATED_SKIPS pattern that lets a skip with ``reason`` through under CI, or None."""
    return next((pattern for pattern, _ in TOLERATED_SKIPS if re.search(pattern, reason)), None)


def _fail_an_untolerated_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not ci_mode() or not report.skipped or hasattr(report, "wasxfail"):  # an xfail is reported as skipped
        return
    reason = skip_reason(report)
    if tolerated_by(reason) is None:
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true, which fails a skip that tests/conftest.py TOLERATED_SKIPS "
                           f"does not list: {reason}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    _fail_an_untolerated_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # a module that skips as a whole
    report = yield
    _fail_an_untolerated_skip(report)
    return report


_TOLERATED_HERE: list[tuple[str, str]] = []  # (test, pattern): the skips CI let through in this session


def pytest_runtest_logreport(report: pytest.TestReport) -> None:  # under xdist: the controller, every worker's
    if ci_mode() and report.skipped and not hasattr(report, "wasxfail"):
        _TOLERATED_HERE.append((report.nodeid, tolerated_by(skip_reason(report)) or "?"))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if ci_mode() and report.skipped:
        _TOLERATED_HERE.append((report.nodeid, tolerated_by(skip_reason(report)) or "?"))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not ci_mode() or hasattr(config, "workerinput"):  # an xdist worker: the controller prints
        return
    terminalreporter.section("skips CI=true tolerates (tests/conftest.py TOLERATED_SKIPS); any other skip fails")
    for pattern, why in TOLERATED_SKIPS:
        terminalreporter.write_line(f"{pattern!r}: {why}")
    terminalreporter.write_line(f"tolerated in this session: {len(_TOLERATED_HERE)}")
    for nodeid, pattern in _TOLERATED_HERE:
        terminalreporter.write_line(f"  {nodeid} ({pattern!r})")


# Under pytest-xdist (`make test` runs `-n 3 --dist loadgroup`) the tests that carry one of these
# markers run one after another on a single worker (an xdist_group), the other tests beside them:
# the netns tests time transfers over shaped links (a rate within 10 %, a reply within a poll) and
# share the root's namespaces and tc; the ray tests each start a Ray runtime of their own that wants
# the machine's CPUs. First match wins, so a test in two of these groups lands in the first.
XDIST_GROUPS = ("netns", "ray")


@pytest.hookimpl(wrapper=True)  # before the other hooks (-m deselects by the jvm marker), then after xdist's
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Every test in tests/test_jvm*.py is marked ``jvm`` (those files are the JVM client's; marked
    here by name so that a new one is deselected by ``make test-fast`` too). Tests marked with one of
    ``XDIST_GROUPS`` get that xdist_group (without xdist the marker does nothing)."""
    for item in items:
        if item.path.name.startswith("test_jvm"):
            item.add_marker(pytest.mark.jvm)
        group = next((name for name in XDIST_GROUPS if item.get_closest_marker(name)), None)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(name=group))
    result = yield
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        _name_the_groups(items)
    return result


def _name_the_groups(items: list[pytest.Item]) -> None:
    """xdist's loadgroup learns a test's group from its node id, ``...@group``, which xdist's own hook
    appends by setting ``item._nodeid``; pytest 9.2 keeps the id in ``item._id`` instead, so with
    pytest-xdist 3.8 the suffix is lost and every test is scheduled alone (pytest-dev/pytest-xdist#1386).
    Append it here where it is missing, and stop the run if a group still does not show in an id: a
    silent loss of the groups would run the netns and ray tests side by side."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if not names:
            continue
        suffix = "@" + "_".join(names)
        if item.nodeid.endswith(suffix):
            continue
        if hasattr(item, "_id"):  # pytest >= 9.2: a structured NodeId
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(item.nodeid + suffix)
        else:
            item._nodeid = item.nodeid + suffix
        if not item.nodeid.endswith(suffix):
            raise pytest.UsageError(f"cannot put {item.nodeid} in its xdist_group {suffix[1:]} "
                                    "(see _name_the_groups in tests/conftest.py)")


NETNS_NICE = -10  # CFS weight 9,548 against a default process's 1,024


@pytest.fixture(autouse=True)
def _netns_tests_go_first_on_the_cpu(request):
    """A netns test times transfers (a rate within 10 %, a reply within a poll) while the other xdist
    workers keep both cores busy with SuperLinks, Ray and the JVM build; seen in CI: a reply taken
    0.91 s after its last byte, a 5 s transfer measured at 5.90 s. For the test's duration its worker
    and everything the test starts (SuperLink, SuperNodes, ServerApp, inherit the nice value) run at
    nice -10, so the scheduler serves them first. Only root may lower a nice value; the netns tests
    skip without root anyway."""
    if request.node.get_closest_marker("netns") is None:
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, NETNS_NICE)
    except PermissionError:
        pass
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)  # raising a nice value back is always allowed


@pytest.fixture(scope="session")
def flower_app(tmp_path_factory) -> Path:
    """The repository's Flower app without the rest of the checkout, for ``flwr run``: pyproject.toml
    (its ``[tool.flwr.app]``), README.md, the ``fedgc`` package and the scenarios. Flower's FAB builder
    lists every file under the app folder before it filters them (``flwr.cli.utils.collect_files``),
    the virtual environment's 60,000 too: 4–5 s of CPU for each ``flwr run`` of the repository itself,
    on a machine the suite keeps busy. ``test_deployment`` still submits the repository once."""
    app = tmp_path_factory.mktemp("flower-app")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, app / name)
    for name in ("fedgc", "scenarios"):
        shutil.copytree(REPO / name, app / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return app


def modules_imported_by(code: str, names: tuple[str, ...]) -> list[str]:
    """Which of the modules ``names`` a fresh interpreter has imported once it has run ``code``
    (what every process that runs the same code pays for)."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {names!r} if m in sys.modules))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def shared_dir() -> Path:
    """The shared folder the tests read their downloaded data from: ``$FEDGC_SHARED_DIR``, default
    ``../shared`` beside the checkout; data sets in its ``data/``, traces in its ``traces/``."""
    return Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared"))


def get_shared(missing: Path | str, items: str, shared: Path | None = None) -> str:
    """A skip reason a newcomer can act on: what is missing, and the ``fedgc fetch`` commands (as this
    process can run them) that put ``items`` where the tests look, in ``shared`` (default: the shared
    folder, ``$FEDGC_SHARED_DIR``)."""
    from fedgc.invocation import as_invoked

    folder = shared if shared is not None else shared_dir()
    data = [item for item in items.split() if item != "traces"]
    commands = ([f"{as_invoked('fetch')} {' '.join(data)} --dir {folder / 'data'}"] if data else []) + \
        ([f"{as_invoked('fetch')} traces --dir {folder}"] if "traces" in items.split() else [])
    where = ("the tests read it from $FEDGC_SHARED_DIR (default ../shared beside the checkout): to fetch "
             "elsewhere, use --dir D/data for data sets and --dir D for traces, then set FEDGC_SHARED_DIR=D")
    if shared is not None:
        where = "this test reads that folder itself, whatever FEDGC_SHARED_DIR says"
    return f"{missing} not found; get it with: {' && '.join(commands)} ({where})"


@pytest.fixture(name="shared_dir")
def shared_traces_dir() -> Path:
    """The shared folder, for tests that replay its network traces."""
    path = shared_dir()
    if not (path / "traces").is_dir():
        pytest.skip(get_shared(path / "traces", "traces"))
    return path


@pytest.fixture
def mnist_root() -> Path:
    root = shared_dir() / "data" / "mnist"
    if not (root / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(get_shared(root, "mnist"))
    return root


@pytest.fixture
def tiny_scenario() -> dict:
    """A scenario tree that runs in about a second: 4 digit clients, 2 rounds."""
    return {
        "name": "tiny",
        "seed": 7,
        "rounds": 2,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
        "model": {"name": "mlp"},
        "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "topk", "density": 0.05},
        "strategy": {"fraction": 1.0},
        "network": {"profile": "lte"},
        "eval": {"target_accuracy": 0.5},
    }


@pytest.fixture
def isolated_registries():
    """What a test registers (a user's model, dataset, compressor, rule or optimizer) is gone after it:
    other tests iterate the registries and must see the built-ins only."""
    from fedgc.aggregation.aggregators import AGGREGATORS
    from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS
    from fedgc.compress.registry import COMPRESSORS
    from fedgc.data.user import USER_DATASETS
    from fedgc.models import MODELS
    from fedgc.plugins import registry as extensions

    tables = (MODELS, COMPRESSORS, AGGREGATORS, SERVER_OPTIMIZERS, USER_DATASETS, extensions._SOURCES)
    saved = [dict(table) for table in tables]
    yield
    for table, before in zip(tables, saved):
        table.clear()
        table.update(before)
