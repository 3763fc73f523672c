"""The ``flower`` engine: the same ServerApp and ClientApp on Flower's simulation runtime (Ray),
submitted the way Flower 1.41–1.42 documents it: a local SuperLink started with ``--simulation`` and
``flwr run`` (``fedgc.flower.runtime.runtime_processes`` has the details).

However the command ends (done, failed, Ctrl-C or SIGTERM), every process the runtime started, Ray's
included, is stopped and waited for before it returns: SIGTERM, then SIGKILL after 10 s. If the
command is killed outright (SIGKILL, the OOM killer), its guard process (``fedgc.runs.process_guard``) does
it, and ``<out>/flower-logs/runtime.json`` (``fedgc.runs.runtime_record``) lets ``--resume`` or
``--overwrite`` of the folder stop anything still left.

Why a generated app folder and not the repository: ``flwr run`` packs every matching file under the
app folder into the FAB (walking ``.venv`` on the way), and an installed fedgc has no repository.
The generated ``pyproject.toml`` names the same components as fedgc's own (``APP_PYPROJECT``); the
code is imported from the installed ``fedgc`` package, in this same environment (the SuperLink's
runtime dependency installation is off).

The scenario goes in as the ``scenario-yaml`` run-config entry, the output folder as ``out-dir``;
the ServerApp writes ``metrics.jsonl``, ``summary.json``, plots and ``model.pt`` there exactly as on
the inline engine, and the summary is read back from ``summary.json``. Flower's logs are kept in
``<out>/flower-logs/``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import tomli_w
import torch

from fedgc.core.stop import ask_to_stop
from fedgc.errors import FedgcError
from fedgc.execution.device import resolve_device
from fedgc.flower.runtime.runtime_processes import (
    flower_env,
    flwr_run,
    free_port,
    signals_ignored,
    sigterm_as_interrupt,
    start_superlink,
    write_connection,
)
from fedgc.flower.setup import NODE_WAIT_S, OUT_DIR, QUIET, SCENARIO_PATH, SCENARIO_YAML
from fedgc.flower.state.client_store import CLIENT_STORE_DIR, store_kind
from fedgc.plugins.import_paths import ALLOW_IMPORTS_ENV
from fedgc.runs.metrics import Summary, read_summary
from fedgc.runs.process_guard import Guard
from fedgc.runs.process_tree import (
    RUNTIME_FOLDER,
    RUNTIME_TOKEN,
    Family,
    adopts_orphans,
    descendants,
    folder_identity,
    terminate,
    token_holders,
)
from fedgc.runs.runtime_record import write_record
from fedgc.scenario.model import Scenario, dump_scenario

CONNECTION = "fedgc-local-simulation"

# Mirrors pyproject.toml's [tool.flwr.app] tables (tests/test_flower_engine.py checks they agree).
APP_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "fedgc"
version = "0.1.0"
description = "fedgc on Flower's simulation runtime"
license = "Apache-2.0"
dependencies = []

[tool.flwr.app]
publisher = "fedgc"

[tool.flwr.app.components]
serverapp = "fedgc.flower.server.server_app:app"
clientapp = "fedgc.flower.client.client_app:app"

[tool.flwr.app.config]
scenario = ""
scenario-yaml = ""
out-dir = ""
quiet = false
node-wait-s = 120.0
client-store-dir = ""
"""


class FlowerRunFailed(FedgcError, ValueError):
    """The Flower run ended without a summary (one line; Flower's logs hold the details)."""


def with_absolute_paths(scenario: Scenario) -> Scenario:
    """The apps run in other processes with other working directories: make ``data.root`` absolute."""
    root = scenario.data.root
    if root is None or Path(root).is_absolute():
        return scenario
    data = scenario.data.model_copy(update={"root": str(Path(root).resolve())})
    return scenario.model_copy(update={"data": data})


BOX = "│╭╮╰╯─ "  # `flwr run` prints its errors in a box: ╭─ Error ─╮ / │ the message │ / ╰──╯


def _last_error(log: Path) -> str:
    lines = [line.strip(BOX) for line in (log.read_text(errors="replace").splitlines() if log.exists() else [])]
    lines = [line for line in lines if line]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] == "Error" and i + 1 < len(lines):
            return lines[i + 1]  # the box's message
        if "ERROR" in lines[i] or "Error" in lines[i]:
            return lines[i]
    return (lines or ["no output"])[-1]


DEFAULT_GPU_SHARE = 0.25  # four client processes per GPU, as Flower's examples reserve it


def federation_config(scenario: Scenario, device: torch.device) -> list[str]:
    """``flwr run --federation-config`` items: one simulated SuperNode per client and, when the run's
    device is a GPU, each client process's GPU share. Without one, Ray gives a client process no GPU
    (it hides the GPUs from it), and the ClientApp's ``device: auto`` would quietly train on the CPU."""
    items = [f"num-supernodes={scenario.data.num_clients}"]
    if scenario.ray.client_cpus is not None:
        items.append(f"client-resources-num-cpus={scenario.ray.client_cpus}")
    if device.type == "cuda":
        items.append(f"client-resources-num-gpus={scenario.client.gpu_share or DEFAULT_GPU_SHARE}")
    return items


def set_ray_address(env: dict[str, str], scenario: Scenario) -> None:
    """Where Flower's simulation process finds Ray: its ``ray.init()`` joins the cluster named by
    ``RAY_ADDRESS`` (Ray's own convention). The scenario decides: ``ray.address``, or when that is
    null, ``local``: a Ray of its own on this machine. Without ``RAY_ADDRESS``, ``ray.init()`` would
    join the cluster a ``ray start`` on this machine last recorded (``/tmp/ray/ray_current_cluster``),
    even one that is gone, and the run would wait on it."""
    env["RAY_ADDRESS"] = scenario.ray.address if scenario.ray.address is not None else "local"


def runtime_processes(token: str, family: Family | None) -> list[int]:
    """What the runtime started: every process holding its token (Ray overwrites some processes'
    environment with their titles), the SuperLink's process tree as read before the clean-up began
    (``family``), and, when this process is the command (it adopts orphans), each of its descendants."""
    found = set(token_holders(token))
    if family is not None:
        found.update(family.members())
    if adopts_orphans():
        found.update(descendants(os.getpid()))
    return sorted(found)


STOP_WAIT_S = 600.0  # how long a Ctrl-C waits for the ServerApp to finish its round and write its outputs


def _stopped_after_round(out: Path, quiet: bool) -> bool:
    """The first Ctrl-C (or SIGTERM): ask the ServerApp (a thread of Flower's simulation process) to stop
    after its round, through the run folder (``fedgc.core.stop``), and wait until it has written its
    outputs; a second Ctrl-C stops at once (KeyboardInterrupt). False if it did not answer in time."""
    ask_to_stop(out)
    if not quiet:
        print("\nstopping after this round (Ctrl-C again to stop at once)", file=sys.stderr, flush=True)
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if (out / "summary.json").exists():
            return True
        time.sleep(0.2)
    return False


def import_paths_env(env: dict[str, str]) -> dict[str, str]:
    """The runtime's processes run the user's own scenario: they may import its import paths
    (``fedgc.plugins.registry``), from the folders this process imports from (the working directory and
    what the user added to ``sys.path``; not the interpreter's own)."""
    own = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
    added = [os.path.abspath(p or ".") for p in sys.path
             if not any(os.path.realpath(p or ".").startswith(root) for root in own)]
    paths = [os.getcwd(), *added, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {ALLOW_IMPORTS_ENV: "1", "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def run_on_simulation_runtime(scenario: Scenario, out_dir: Path | None, *, quiet: bool = False) -> Summary:
    with tempfile.TemporaryDirectory(prefix="fedgc-flower-") as tmp:
        work = Path(tmp)
        out = (out_dir if out_dir is not None else work / "out").resolve()
        logs = out / "flower-logs"
        logs.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").unlink(missing_ok=True)
        app_dir = work / "app"
        app_dir.mkdir()
        (app_dir / "pyproject.toml").write_text(APP_PYPROJECT)
        run_config = work / "run-config.toml"
        # The progress bar stays off: the ServerApp runs in Flower's simulation process, not on this terminal.
        run_config.write_text(tomli_w.dumps({
            SCENARIO_PATH: "", SCENARIO_YAML: dump_scenario(with_absolute_paths(scenario)),
            OUT_DIR: str(out), QUIET: True, NODE_WAIT_S: 60.0,
            # client_state.store on disk: the run folder's store, which the ClientApps open (client_store_mod)
            CLIENT_STORE_DIR: str(out) if store_kind(scenario) == "disk" else ""}))
        home = work / "flwr-home"
        env = flower_env(home)
        env.update(import_paths_env(env))  # a scenario's import paths resolve in the runtime's processes too
        set_ray_address(env, scenario)
        if out_dir is not None:  # what proves a leftover process is this folder's (fedgc.runs.runtime_record)
            env[RUNTIME_FOLDER] = folder_identity(out)
        port = free_port()
        write_connection(home, CONNECTION, f"127.0.0.1:{port}")
        if not quiet:
            ray = f"the Ray cluster at {scenario.ray.address}" if scenario.ray.address else "a Ray of its own"
            print(f"engine flower: local SuperLink on 127.0.0.1:{port}, {scenario.data.num_clients} simulated "
                  f"SuperNodes on {ray}; Flower's logs in {logs}", file=sys.stderr)
        link = None
        # The guard ends the runtime if this process dies without doing so (SIGKILL, the OOM killer);
        # the record lets a later --resume or --overwrite of the folder stop what is left of it.
        with Guard() as guard:
            try:
                with sigterm_as_interrupt():
                    link = start_superlink(port, logs, env, simulation=True, guard=guard)
                    if out_dir is not None:
                        write_record(out, env[RUNTIME_TOKEN], port, {"flower-superlink": link.process.pid})
                    try:
                        flwr_run(app_dir, CONNECTION, run_config, env, logs / "flwr-run.log",
                                 federation_config=federation_config(scenario, resolve_device(scenario.device)),
                                 guard=guard)
                    except KeyboardInterrupt:
                        if out_dir is None or not _stopped_after_round(out, quiet):
                            raise
            finally:
                # Also when interrupted (Ctrl-C, SIGTERM): nothing the runtime started may go on writing
                # the run folder after this returns.
                with signals_ignored():
                    family = Family([link.process.pid]) if link is not None and os.path.isdir("/proc") else None
                    if family is not None:
                        family.members()  # the whole tree, before anything in it is stopped
                    if link is not None:
                        link.stop()
                    terminate(lambda: runtime_processes(env[RUNTIME_TOKEN], family))
        summary = out / "summary.json"
        if not summary.exists():
            raise FlowerRunFailed(f"the Flower run failed ({_last_error(logs / 'flwr-run.log')}); "
                                  f"logs in {logs}")
        return read_summary(summary)
