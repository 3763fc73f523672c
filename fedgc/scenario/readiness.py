"""Is a scenario ready to run? The checks behind ``fedgc check`` (``quick_check``: files found, every
client's network built, no data loaded) and ``fedgc run --check`` / ``fedgc check --deep``
(``check_scenario``: the data loaded and partitioned, the model built). Nothing is trained."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fedgc.data.base import FederatedData
    from fedgc.data.config import DataConfig
    from fedgc.network.timeline import NetworkModel
    from fedgc.scenario.model import Scenario

IDX_DIRS = {"mnist": "mnist", "fashion_mnist": "fashion_mnist", "kmnist": "kmnist"}  # as in fedgc.data.DATASETS
LEAF_DIRS = {"shakespeare": "leaf-shakespeare", "femnist": "leaf-femnist"}


def _check_clock(scenario: Scenario, network: NetworkModel, samples: int) -> None:
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


def _network(scenario: Scenario, clients: int) -> NetworkModel:
    import numpy as np
    import simpy

    from fedgc.network.build import build_network

    nodes = list(range(1, clients + 1))
    return build_network(simpy.Environment(), scenario.network, nodes, np.random.default_rng(scenario.seed))


def _data_files_present(config: DataConfig) -> str:
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


def quick_check(scenario: Scenario) -> str:
    """The check without loading the data: a one-line description; ``ValueError``/``OSError`` if unusable."""
    from fedgc.execution.training import samples_asked

    found = _data_files_present(scenario.data)
    network = _network(scenario, scenario.data.num_clients)
    if scenario.client.local_steps is not None:  # else the round's samples depend on the partitions (--deep)
        _check_clock(scenario, network, samples_asked(scenario, None))
    return (f"{scenario.name}: {scenario.data.num_clients} clients, dataset {scenario.data.dataset} ({found}), "
            f"model {scenario.model.name}, compression {scenario.compression.name}, downlink {scenario.downlink.name}, "
            f"network {scenario.network.profile}/{scenario.network.link.name}; not loaded: --deep loads the data "
            "and builds the model")


def check_scenario(scenario: Scenario, data: FederatedData) -> str:
    """The deep check (``data``: its loaded FederatedData): a one-line description of what the run would
    train on; ``ValueError``/``OSError`` if unusable."""
    from fedgc.core.parts import build_model_for
    from fedgc.execution.training import samples_asked
    from fedgc.models import parameter_count

    model = build_model_for(scenario, data)
    network = _network(scenario, len(data.partitions))
    _check_clock(scenario, network, samples_asked(scenario, data))
    return (f"{scenario.name}: {len(data.partitions)} clients, {sum(len(p) for p in data.partitions)} train samples, "
            f"model {scenario.model.name} ({parameter_count(model):,} parameters), "
            f"compression {scenario.compression.name}, downlink {scenario.downlink.name}, "
            f"network {scenario.network.profile}/{scenario.network.link.name}")


def deep_report(scenario: Scenario, data: FederatedData) -> str:
    """``--deep``'s line once the data is loaded (``data``): the model built (a plugin's builder runs here:
    what it raises is one ``PluginError`` line naming it) and the plugins that ran, named."""
    from fedgc.plugins.registry import PLUGIN_KEYS, is_built_in, running

    with running("model", scenario.model.name):
        line = check_scenario(scenario, data)
    ran = [f"{kind} {getattr(getattr(scenario, section), key)}" for section, key, kind in PLUGIN_KEYS
           if not is_built_in(kind, getattr(getattr(scenario, section), key))]
    return line + (f"; plugins imported and run: {', '.join(ran)}" if ran else "")
