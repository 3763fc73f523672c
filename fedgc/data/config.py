"""The ``data`` section of a scenario (pydantic; unknown keys are errors).

Bounds measured on a 2-core machine (``--check``: load, partition, build every client's network):
10,000 MNIST clients take 11 s and 0.85 GB, so ``num_clients`` is at most ``MAX_CLIENTS``; FedProx's
synthetic data grows with the clients (about 360 samples each: 1,000 take 7 s and 0.7 GB, 5,000 take
38 s and 2.7 GB), so it allows at most ``MAX_SYNTHETIC_CLIENTS`` with the paper's uncapped sizes, and
up to ``MAX_SYNTHETIC_CLIENTS_CAPPED`` when ``synthetic.max_samples_per_device`` caps them, as long as
clients × cap × dimension ≤ ``MAX_SYNTHETIC_VALUES`` (the features' float32 values; docs/data.md).
``root`` is refused for a dataset that reads no files (``digits``, ``synthetic``, ``hf:``), rather than silently ignored.
A partition or dataset that needs flwr-datasets (``fedgc.data.optional``) is refused where it is not installed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fedgc.data.hf import PREFIX as HF_PREFIX
from fedgc.data.hf import HuggingFaceConfig
from fedgc.data.optional import installed, missing_message, needs_it

MAX_CLIENTS = 10_000
MAX_SYNTHETIC_CLIENTS = 1_000  # synthetic with the paper's uncapped (heavy-tailed) device sizes
MAX_SYNTHETIC_CLIENTS_CAPPED = 100_000  # synthetic with synthetic.max_samples_per_device set
MAX_SYNTHETIC_VALUES = 300_000_000  # clients × max_samples_per_device × dimension: 1.2 GB of float32 features
# What generating synthetic data allocates at most (``synthetic_bytes``: the features' float32 values, their
# labels and device ids, and the largest device's float64 draws while it is generated), checked when the
# scenario is validated, from the seed's own device sizes, before anything is allocated.
MAX_DATA_BYTES = 2 * 1024**3
# Datasets read from data.root (or $FEDGC_DATA_DIR); the others ship with a package or are generated.
FILE_DATASETS = ("mnist", "fashion_mnist", "kmnist", "shakespeare", "femnist")
# Every name of ``fedgc.data.DATASETS`` (tests/test_import_graph.py checks they agree): the section names the
# datasets without importing their loaders, which import this module.
DATASET_NAMES = ("digits", *FILE_DATASETS, "synthetic")


def synthetic_bytes(num_clients: int, config: SyntheticConfig, seed: int) -> int:
    """The bytes generating ``dataset: synthetic`` allocates at most, from the device sizes the seed
    draws (``fedgc.data.synthetic.device_sizes``; a few ms for 100,000 devices): 4 B per feature value and
    16 B per sample (label, device id) in the splits, and 24 B per value of the largest device while it
    is drawn (float64 features, noise and their sum)."""
    import numpy as np

    from fedgc.data.synthetic import device_sizes

    sizes = device_sizes(num_clients, np.random.default_rng(seed), config.max_samples_per_device)
    total, largest = int(sizes.sum()), int(sizes.max(initial=0))
    return total * (4 * config.dimension + 16) + 24 * largest * config.dimension


def known_input(config: DataConfig) -> tuple[tuple[int, ...], int] | None:
    """(input shape, classes) of a built-in dataset whose shape does not depend on its files (digits,
    femnist, synthetic); None when only loading it tells (IDX files, Shakespeare, hf:, a user's data)."""
    if config.dataset == "digits":
        return (1, 8, 8), 10
    if config.dataset == "femnist":
        return (1, 28, 28), 62
    if config.dataset == "synthetic":
        return (config.synthetic.dimension,), config.synthetic.num_classes
    return None


class SyntheticConfig(BaseModel):
    """FedProx's synthetic(α, β) (``dataset: synthetic``); one device per client (``num_clients``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    alpha: float = Field(1.0, ge=0.0, le=1e6, description="spread of the devices' models (u_k ~ N(0, alpha))")
    beta: float = Field(1.0, ge=0.0, le=1e6, description="spread of the devices' features (B_k ~ N(0, beta))")
    iid: bool = Field(False, description="FedProx's synthetic_iid: one model for all devices, same features")
    dimension: int = Field(60, ge=1, le=10_000, description="feature dimension")
    num_classes: int = Field(10, ge=2, le=1_000)
    max_samples_per_device: int | None = Field(
        None, ge=2, le=100_000, description="cap on each device's samples (train + test; default: the paper's "
        "uncapped power law); needed beyond 1,000 clients, and the data is then bounded by clients × cap × dimension")


class DataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dataset: str = Field("digits", description="digits, mnist, fashion_mnist, kmnist, shakespeare, femnist, "
                                               "synthetic, or hf:<Hugging Face dataset id>")
    root: str | None = Field(None, description="directory holding the dataset files (MNIST-format: four IDX files; "
                                               "LEAF: train/ and test/ folders); default $FEDGC_DATA_DIR/<name>")
    num_clients: int = Field(10, ge=1, le=MAX_SYNTHETIC_CLIENTS_CAPPED, description=f"at most {MAX_CLIENTS:,} "
                             f"({MAX_SYNTHETIC_CLIENTS:,} for synthetic, {MAX_SYNTHETIC_CLIENTS_CAPPED:,} for "
                             "synthetic with synthetic.max_samples_per_device)")
    partition: str = Field("iid", description="iid, dirichlet, shards, pathological, natural or size_skew")
    alpha: float = Field(0.5, gt=0.0, description="Dirichlet concentration (smaller = more label skew)")
    shards_per_client: int = Field(2, ge=1, description="partition: shards; McMahan et al. use 2")
    classes_per_client: int = Field(2, ge=1, description="partition: pathological; labels per client")
    size_sigma: float = Field(1.0, ge=0.0, le=10.0, description="partition: size_skew; lognormal sigma of client sizes")
    min_partition_size: int = Field(1, ge=0, description="partition: dirichlet, size_skew; fewest samples a client gets")
    max_train_samples: int | None = Field(None, ge=1, description="use only the first N train samples (quick runs)")
    max_test_samples: int | None = Field(None, ge=1, description="evaluate on only the first N test samples")
    # ignore[arg-type] below: without the pydantic.mypy plugin, mypy's dataclass_transform takes a positional
    # Field default (Field(None, ...)) for no default, so it sees SyntheticConfig() missing arguments
    synthetic: SyntheticConfig = Field(default_factory=SyntheticConfig)  # type: ignore[arg-type]
    huggingface: HuggingFaceConfig = Field(default_factory=HuggingFaceConfig)  # type: ignore[arg-type]

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, name: str) -> str:
        if name.startswith(HF_PREFIX):
            if not name.removeprefix(HF_PREFIX).strip():
                raise ValueError("hf: needs a Hugging Face dataset id, e.g. hf:uoft-cs/cifar10")
            return name
        from fedgc.data.user import USER_DATASETS

        if name not in DATASET_NAMES and name not in USER_DATASETS:
            known = ", ".join([*DATASET_NAMES, *USER_DATASETS])
            raise ValueError(f"unknown dataset {name!r}; known: {known}, hf:<id>")
        return name

    @field_validator("partition")
    @classmethod
    def _known_partition(cls, name: str) -> str:
        from fedgc.data.partition import PARTITIONERS

        if name not in PARTITIONERS:
            raise ValueError(f"unknown partition {name!r}; known: {', '.join(PARTITIONERS)}")
        return name

    @model_validator(mode="after")
    def _consistent(self) -> DataConfig:
        needs = needs_it(self.dataset, self.partition)
        if needs is not None and not installed():  # refused before a run starts (fedgc check says it too)
            raise ValueError(missing_message(*needs))
        if self.root is not None and self.dataset not in FILE_DATASETS:
            raise ValueError(f"data.root: dataset {self.dataset!r} reads no files, so root would be ignored; "
                             f"remove it (root is for {', '.join(FILE_DATASETS)})")
        if self.dataset != "synthetic" and self.num_clients > MAX_CLIENTS:
            raise ValueError(f"data.num_clients: Input should be less than or equal to {MAX_CLIENTS} "
                             f"(more only for dataset synthetic with synthetic.max_samples_per_device), "
                             f"got {self.num_clients:,}")
        cap = self.synthetic.max_samples_per_device
        if self.dataset == "synthetic" and cap is None and self.num_clients > MAX_SYNTHETIC_CLIENTS:
            raise ValueError(f"data.num_clients: at most {MAX_SYNTHETIC_CLIENTS:,} for dataset synthetic "
                             f"(its data grows with the clients), got {self.num_clients:,}; set "
                             "synthetic.max_samples_per_device to go up to "
                             f"{MAX_SYNTHETIC_CLIENTS_CAPPED:,}")
        values = self.num_clients * (cap or 0) * self.synthetic.dimension
        if self.dataset == "synthetic" and values > MAX_SYNTHETIC_VALUES:
            raise ValueError(f"data.synthetic.max_samples_per_device: {self.num_clients:,} clients × {cap:,} "
                             f"samples × dimension {self.synthetic.dimension:,} is {values:,} feature values, "
                             f"more than {MAX_SYNTHETIC_VALUES:,} ({MAX_SYNTHETIC_VALUES * 4 / 1e9:.1f} GB "
                             "of float32); lower the cap, the clients or the dimension")
        return self
