"""Running a scenario on an engine. ``inline`` (default): the ServerApp and ClientApps in this
process, every message round-tripped through Flower's serialization. ``flower``: the same apps on
Flower's simulation runtime (Ray), needs ``pip install 'fedgc[ray]'``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

from fedgc.core.observe import RoundObserver, default_observers
from fedgc.errors import FedgcError
from fedgc.runs.metrics import Summary
from fedgc.scenario.model import Scenario

# Exit codes of the command line (fedgc.cli.run, sweeps): 2 the scenario or its inputs are invalid
# (one line on stderr); 3 the run stopped early (diverged or idle; the last good model is kept).
EXIT_INVALID = 2
EXIT_DIVERGED = 3


def run_inline(scenario: Scenario, out_dir: Path | None, *, quiet: bool = False, resume: bool = False,
               observers: Sequence[RoundObserver] = (), title: str | None = None) -> Summary:
    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.loop import run_rounds

    # The loop the ServerApp's main runs, called directly so the summary comes back to the caller.
    shown = default_observers(scenario.rounds, out_dir, quiet=quiet, title=title or scenario.name,
                              target_accuracy=scenario.eval.target_accuracy)
    return run_rounds(InlineGrid.for_scenario(scenario, out_dir=out_dir), scenario, out_dir,
                      observers=[*shown, *observers], resume=resume, graceful_stop=True)


class EngineUnavailable(FedgcError, ValueError):
    """An engine whose optional dependencies are not installed (reported in one line, exit 2)."""


def run_flower(scenario: Scenario, out_dir: Path | None, *, quiet: bool = False, resume: bool = False,
               observers: Sequence[RoundObserver] = (), title: str | None = None) -> Summary:
    """Flower's simulation runtime (Ray): a local SuperLink with ``--simulation`` and ``flwr run``. The
    loop runs in the runtime's ServerApp process, with its own progress line and plots (titled with the
    scenario's name; redrawn here under ``title`` when one is given): ``observers`` are not called here
    (``fedgc.api.runs`` replays the run folder to them)."""
    import importlib.util

    from fedgc.plugins.registry import registered_in_python

    local = registered_in_python(scenario.model_dump(mode="json"))
    if local:
        raise EngineUnavailable(f"engine 'flower': {local[0]} was registered from Python in this process only, and "
                                "Flower's runtime runs the clients and the server loop in other processes: "
                                "name it by import path (package.module:attribute) or install it as a plugin (docs/api.md)")
    if importlib.util.find_spec("ray") is None:
        raise EngineUnavailable("engine 'flower' needs Ray, which is not installed: pip install 'fedgc[ray]'")
    from fedgc.flower.runtime.flower_engine import run_on_simulation_runtime, with_absolute_paths

    if resume:  # refuse a resume here, in one line, before the runtime starts (the apps see absolute paths)
        from fedgc.core.checkpoint import resumable
        from fedgc.flower.state.client_store import check_store_for_resume

        # cast: a resume is of a run folder (callers pass one with resume); not checked here, as before
        state = resumable(cast(Path, out_dir), with_absolute_paths(scenario))
        # a store on disk holds the rows it recorded
        check_store_for_resume(state["transport"], cast(Path, out_dir))

    summary = run_on_simulation_runtime(scenario, out_dir, quiet=quiet)
    if out_dir is not None and title and title != scenario.name and (out_dir / "metrics.jsonl").is_file():
        from fedgc.reports.plots import plot_run
        from fedgc.runs.metrics import read_rounds

        plot_run(read_rounds(out_dir / "metrics.jsonl"), out_dir / "plots", title, scenario.eval.target_accuracy)
    return summary


ENGINES = {"inline": run_inline, "flower": run_flower}


def run_scenario(scenario: Scenario, out_dir: Path | None, *, quiet: bool = False, resume: bool = False,
                 observers: Sequence[RoundObserver] = (), title: str | None = None) -> Summary:
    """Run ``scenario`` on its engine into ``out_dir`` (a claimed run folder, or None for no files).
    ``title``: the run's plots' title (default: the scenario's name)."""
    return ENGINES[scenario.engine](scenario, out_dir, quiet=quiet, resume=resume, observers=observers, title=title)
