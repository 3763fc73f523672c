"""fedgc.data's optional dependency: flwr-datasets (and with it HF ``datasets``, pyarrow and pandas),
installed by the extra ``fedgc[datasets]``.

Three partitioners run flwr-datasets' own (``shards``, ``pathological``, ``size_skew``) and an
``hf:<id>`` dataset loads through its ``FederatedDataset``; every other dataset (digits, the IDX and
LEAF files, synthetic, a user's) and partitioner (``iid``, ``dirichlet``, ``natural``) needs none of
it. Without it, a scenario that needs it is refused when it is validated (``fedgc check``, ``fedgc
run``, ``fedgc.Scenario``...), and the partitioners and the Hub loader refuse when called, each in one
line naming what to install (``FlowerDatasetsUnavailable``). Whether it is installed is found without
importing it (HF ``datasets`` alone costs a process about 1.6 s of CPU)."""

from __future__ import annotations

import importlib.util

from fedgc.errors import FedgcError

INSTALL = "pip install 'fedgc[datasets]'"
MODULE = "flwr_datasets"  # HF datasets, pyarrow and pandas are its dependencies: installed with it
PARTITIONS = ("shards", "pathological", "size_skew")  # the partitioners that run flwr-datasets'
HF_PREFIX = "hf:"  # as fedgc.data.hf.PREFIX, which imports this module


class FlowerDatasetsUnavailable(FedgcError, ValueError):
    """A partitioner or data set that needs flwr-datasets, which is not installed (one line naming the install)."""


def installed() -> bool:
    """Whether flwr-datasets can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(MODULE) is not None
    except (ImportError, ValueError):  # a finder that refuses the name; a module without a spec
        return False


def needs_it(dataset: str, partition: str) -> tuple[str, str] | None:
    """The scenario key and value that need flwr-datasets (``("data.partition", "shards")``,
    ``("data.dataset", "hf:<id>")``), or None."""
    if dataset.startswith(HF_PREFIX):
        return "data.dataset", dataset
    if partition in PARTITIONS:
        return "data.partition", partition
    return None


def missing_message(key: str, value: str) -> str:
    return f"{key}: {value} needs flwr-datasets, which is not installed: {INSTALL}"


def require(key: str, value: str) -> None:
    """Refuse ``key: value`` (e.g. ``data.partition``, ``shards``) in one line when flwr-datasets is not
    installed."""
    if not installed():
        raise FlowerDatasetsUnavailable(missing_message(key, value))
