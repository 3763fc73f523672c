"""The scenario's smaller sections: the model, the clients' training, the strategy, evaluation and
the client-state store (the data, compression, downlink and network sections live with their
packages). Unknown keys are errors in every section."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# Bounds on the knobs whose cost grows with their value (docs/reliability.md). Measured on the 2-core
# machine, one thread, batch 32: 10,000 SGD steps take 21 s (small_cnn), 5.4 min (mnist_cnn) and
# 20 min (resnet20) per client per round; McMahan et al.'s E=5, B=10 on 600 samples is 300 steps.
MAX_LOCAL_STEPS = 10_000
MAX_EPOCHS = 100.0
MAX_BATCH = 65_536


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ModelConfig(_Section):
    name: str = Field("small_cnn", description="model name (see fedgc.models.MODELS)")
    options: dict[str, Any] = Field(default_factory=dict, description="model-specific options (docs/data-and-models.md)")

    @model_validator(mode="after")
    def _known_model(self) -> ModelConfig:
        from fedgc.models import MODELS, validate_model_options

        if self.name not in MODELS:
            raise ValueError(f"unknown model {self.name!r}; known: {', '.join(MODELS)}")
        validate_model_options(self.name, self.options)
        return self


class ClientConfig(_Section):
    local_steps: int | None = Field(None, ge=1, le=MAX_LOCAL_STEPS, description="SGD steps per round (exclusive with epochs)")
    epochs: float | None = Field(None, gt=0.0, le=MAX_EPOCHS, description="passes over the client's data per round")
    batch_size: int = Field(32, ge=1, le=MAX_BATCH)
    lr: float = Field(0.05, gt=0.0, le=1e6)
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="local optimizer momentum")
    weight_decay: float = Field(0.0, ge=0.0)
    execution: Literal["auto", "sequential", "vectorized"] = Field(
        "auto", description="inline engine: train a round's clients one by one, or together with torch.func "
                            "(vectorized; within float tolerance of sequential); auto: vectorized on CUDA")
    gpu_share: float | None = Field(
        None, gt=0.0, le=1.0, description="engine flower on a GPU: the share of one GPU each client process "
                                         "reserves (Ray's num_gpus; 1/gpu_share clients train at once per GPU); "
                                         "default 0.25 when the run's device is a GPU")
    report_norms: bool = Field(
        False, description="clients report their update's L2 norm before and after local clipping (DGC's "
                           "clip_norm): per client in clients.jsonl, per round in metrics.jsonl (norm_*); "
                           "adds two numbers to each reply")

    @model_validator(mode="after")
    def _steps_or_epochs(self) -> ClientConfig:
        if self.local_steps is not None and self.epochs is not None:
            raise ValueError("set either local_steps or epochs, not both")
        if self.local_steps is None and self.epochs is None:
            self.local_steps = 1
        return self


class StrategyConfig(_Section):
    fraction: float = Field(1.0, gt=0.0, le=1.0, description="fraction of clients selected per round")
    min_clients: int = Field(1, ge=1, description="fewest completed updates for a round to count")
    too_few: Literal["skip", "retry"] = Field(
        "skip", description="a round with fewer than min_clients updates: skip it, or retry it (same round number)")
    max_retries: int = Field(3, ge=0, le=1000, description="too_few: retry — attempts after the first, then skip")
    server_optimizer: str = Field("sgd", description="sgd (FedAvg), momentum (FedAvgM), adam (FedAdam), or a "
                                  "registered optimizer (fedgc.aggregation.server_optim, docs/api.md)")
    server_lr: float = Field(1.0, gt=0.0)
    server_momentum: float = Field(0.9, ge=0.0, lt=1.0, description="FedAvgM momentum (server_optimizer: momentum)")
    adam_beta1: float = Field(0.9, ge=0.0, lt=1.0)
    adam_beta2: float = Field(0.99, ge=0.0, lt=1.0)
    adam_tau: float = Field(1e-3, gt=0.0, description="FedAdam's adaptivity epsilon")
    clip_update_norm: float | None = Field(None, gt=0.0, description="server bounds each update's L2 norm")
    max_num_examples: int = Field(10_000_000, ge=1, description="replies claiming more examples are rejected")
    norm_bound_factor: float | None = Field(
        5.0, ge=1.0, description="from 3 updates on, scale down any update whose L2 norm exceeds this x the "
        "round's median update norm (null: off)")
    max_weight_share: float = Field(
        0.5, gt=0.0, le=1.0, description="from 3 updates on, no update weighs more than this share of the "
        "aggregate (1.0: off)")
    aggregation: str = Field(
        "mean", description="FedAvg's weighted mean, or from 3 updates on the coordinate-wise trimmed_mean or "
        "median of the (norm-bounded) updates, unweighted; or a registered rule (fedgc.aggregation.aggregators, docs/api.md)")
    trim_fraction: float = Field(0.1, ge=0.0, lt=0.5, description="trimmed_mean: share of the largest and of the "
                                 "smallest values dropped per coordinate")
    max_idle_rounds: int = Field(10, ge=0, description="stop the run (exit 3) after this many consecutive "
                                                       "attempts that applied no update; 0: never stop")
    aggregation_options: dict[str, Any] = Field(
        default_factory=dict, description="settings of a registered aggregation rule (its Options; docs/api.md)")
    server_optimizer_options: dict[str, Any] = Field(
        default_factory=dict, description="settings of a registered server optimizer (its Options; docs/api.md)")

    @field_validator("server_optimizer")
    @classmethod
    def _known_server_optimizer(cls, name: str) -> str:
        from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS

        if name not in SERVER_OPTIMIZERS:
            raise ValueError(f"unknown server optimizer {name!r}; known: {', '.join(SERVER_OPTIMIZERS)}")
        return name

    @field_validator("aggregation")
    @classmethod
    def _known_aggregation(cls, name: str) -> str:
        from fedgc.aggregation.aggregators import AGGREGATORS

        if name not in AGGREGATORS:
            raise ValueError(f"unknown aggregation rule {name!r}; known: {', '.join(AGGREGATORS)}")
        return name

    @model_validator(mode="after")
    def _plugin_options(self) -> StrategyConfig:
        from fedgc.aggregation.aggregators import AGGREGATORS
        from fedgc.aggregation.server_optim import SERVER_OPTIMIZERS
        from fedgc.plugins.options import unknown_key

        for key, name, model in (("aggregation_options", self.aggregation, AGGREGATORS[self.aggregation].Options),
                                 ("server_optimizer_options", self.server_optimizer,
                                  SERVER_OPTIMIZERS[self.server_optimizer].Options)):
            problem = unknown_key(model, getattr(self, key))  # whatever the Options' own extra= says
            if problem is not None:
                raise ValueError(f"{key}.{problem} ({name}'s options: {', '.join(model.model_fields) or 'none'})")
            try:
                model.model_validate(getattr(self, key), strict=True)
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "options"
                problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
                raise ValueError(f"{key}.{where}: {problem} ({name}'s options: "
                                 f"{', '.join(model.model_fields) or 'none'})") from None
        return self


class EvalConfig(_Section):
    target_accuracy: float = Field(0.9, gt=0.0, le=1.0)
    every: int = Field(1, ge=1, le=1_000_000, description="evaluate the global model every N rounds (and the last)")
    batch_size: int = Field(1024, ge=1, le=MAX_BATCH)


class ClientStateConfig(_Section):
    store: Literal["auto", "memory", "disk"] = Field(
        "auto", description="where stateful clients keep their state between turns (fedgc.flower.state.client_store): "
                            "memory, disk (an SQLite file in the run folder), or auto: disk when 8 B per parameter "
                            "for every client would pass auto_disk_gb (docs/performance.md, How big)")
    auto_disk_gb: float = Field(2.0, gt=0.0, le=1e6, description="store: auto — the population's fp32 state "
                                "(8 B per parameter per client) above which the store is on disk")


class RayConfig(_Section):
    """engine: flower — the Ray that Flower's simulation runtime trains the clients on."""

    address: str | None = Field(
        None, max_length=256, pattern=r"^(auto|[A-Za-z0-9.\-]+:[0-9]{1,5})$",
        description="an existing Ray cluster's address (HOST:PORT as `ray start --head` prints it, or auto); run "
                    "fedgc on one of the cluster's nodes. null: Flower starts its own Ray on this machine "
                    "(RAY_ADDRESS in the environment is then ignored)")
    client_cpus: int | None = Field(
        None, ge=1, le=1024, description="CPUs each client process reserves (Ray's num_cpus, a whole number in "
                                         "Flower's federation config; Flower's default is 2): a node with C CPUs "
                                         "trains C // client_cpus clients at once")
