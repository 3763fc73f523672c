"""``fedgc check SCENARIO [--deep]``: is the scenario ready to run? Train nothing.

Without ``--deep`` (a few seconds): the scenario is validated, every file it names is found (the
data set's files, traces, capacity and availability files: a missing one names the ``fedgc fetch``
command that gets it) and every client's link, device and availability process is built, without
loading the training data. ``--deep`` (``python -m fedgc.simulate SCENARIO --check``) also loads and
partitions the data and builds the model, so a scenario that passes it fails later only for reasons
of training itself (divergence, running out of memory).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

IDX_DIRS = {"mnist": "mnist", "fashion_mnist": "fashion_mnist", "kmnist": "kmnist"}  # as in fedgc.data.DATASETS
LEAF_DIRS = {"shakespeare": "leaf-shakespeare", "femnist": "leaf-femnist"}


def _check_clock(scenario, network, samples: int) -> None:
    """Simulated quantities that would run forever are refused now: a device slower than
    ``network.max_phase_s`` for one round's samples, a population that first comes online later than it."""
    bound = scenario.network.max_phase_s
    for node, client in network.clients.items():
        seconds = client.device.compute_time(samples)
        if not seconds <= bound:
            raise ValueError(f"client {node}: one round's compute ({samples} samples) would last {seconds:.3g} s of "
                             f"simulated time, more than network.max_phase_s = {bound:g}")
    first = min((client.availability.next_on(0.0) for client in network.clients.values()), default=0.0)
    if not first <= bound:
        raise ValueError(f"no client comes online before {first:.3g} s of simulated time, later than "
                         f"network.max_phase_s = {bound:g}")


def _network(scenario, clients: int):
    import numpy as np
    import simpy

    from fedgc.network.build import build_network

    nodes = list(range(1, clients + 1))
    return build_network(simpy.Environment(), scenario.network, nodes, np.random.default_rng(scenario.seed))


def _data_files_present(config) -> str:
    """Find the data set's files without reading them; what was found, or a one-line ``DataFileError``."""
    from fedgc.data.base import resolve_root
    from fedgc.data.mnist import FILES, _find, load_mnist_dir, require_dir

    if config.dataset in IDX_DIRS:
        root = resolve_root(config.root, config.dataset, IDX_DIRS[config.dataset], "a directory with the four IDX files")
        require_dir(root, "a directory with the four IDX files")
        if any(_find(root, stem) is None for stem in FILES.values()):
            load_mnist_dir(root)  # raises the usual one-line error naming the missing files
        return f"data files in {root}"
    if config.dataset in LEAF_DIRS:
        what = "a LEAF directory with train/ and test/"
        root = resolve_root(config.root, config.dataset, LEAF_DIRS[config.dataset], what)
        require_dir(root, what)
        for split in ("train", "test"):
            require_dir(root / split, what)
        return f"data files in {root}"
    if config.dataset.startswith("hf:"):
        return "data from the Hugging Face hub (not fetched: --deep does)"
    return "data generated or bundled"


def quick_check(scenario) -> str:
    """The check without loading the data: a one-line description; ``ValueError``/``OSError`` if unusable."""
    from fedgc.training import samples_asked

    found = _data_files_present(scenario.data)
    network = _network(scenario, scenario.data.num_clients)
    if scenario.client.local_steps is not None:  # else the round's samples depend on the partitions (--deep)
        _check_clock(scenario, network, samples_asked(scenario, None))
    return (f"{scenario.name}: {scenario.data.num_clients} clients, dataset {scenario.data.dataset} ({found}), "
            f"model {scenario.model.name}, compression {scenario.compression.name}, downlink {scenario.downlink.name}, "
            f"network {scenario.network.profile}/{scenario.network.link.name}; not loaded: --deep loads the data "
            "and builds the model")


def check_scenario(scenario, data) -> str:
    """The deep check (``data``: its loaded FederatedData): a one-line description of what the run would
    train on; ``ValueError``/``OSError`` if unusable."""
    from fedgc.core.parts import build_model_for
    from fedgc.models import parameter_count
    from fedgc.training import samples_asked

    model = build_model_for(scenario, data)
    network = _network(scenario, len(data.partitions))
    _check_clock(scenario, network, samples_asked(scenario, data))
    return (f"{scenario.name}: {len(data.partitions)} clients, {sum(len(p) for p in data.partitions)} train samples, "
            f"model {scenario.model.name} ({parameter_count(model):,} parameters), "
            f"compression {scenario.compression.name}, downlink {scenario.downlink.name}, network {scenario.network.profile}/{scenario.network.link.name}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fedgc check",
        description="Check that a scenario is ready to run, without training: validate it, find every file it "
                    "names (data set, traces) and build every client's network. A missing file names the "
                    "'fedgc fetch' command that gets it. Exit status 0 when ready, 2 with a one-line error.")
    parser.add_argument("scenario", help="scenario YAML file")
    parser.add_argument("--deep", action="store_true",
                        help="also load and partition the training data and build the model (slower)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key, e.g. --set compression.density=0.001 (repeatable)")
    parser.add_argument("--sweep", dest="sweeps", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="check every point of the sweep (implies --deep; repeatable)")
    parser.add_argument("--seeds", metavar="S1,S2,...", help="check each seed (= --sweep seed=S1,S2,...)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """``fedgc check``; returns the exit code."""
    args = parse_args(argv)
    if args.deep or args.sweeps or args.seeds is not None:
        from fedgc.simulate import main as simulate

        extra = [*(f"--set={o}" for o in args.overrides), *(f"--sweep={s}" for s in args.sweeps),
                 *([f"--seeds={args.seeds}"] if args.seeds is not None else [])]
        return simulate([args.scenario, *extra, "--check"])
    from fedgc.scenario import ScenarioError, load_scenario

    try:
        print(f"ok: {quick_check(load_scenario(Path(args.scenario), args.overrides))}")
    except (ScenarioError, ValueError, OSError) as err:
        print(f"error: {err}".splitlines()[0], file=sys.stderr)
        return 2
    return 0
