"""The ``data`` section of a scenario (pydantic; unknown keys are errors)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class DataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str = Field("digits", description="dataset name: digits (offline, ships with scikit-learn) or mnist")
    root: str | None = Field(None, description="directory holding the dataset files (mnist: the four IDX .gz files)")
    num_clients: int = Field(10, ge=1, le=1_000_000)
    partition: str = Field("iid", description="iid or dirichlet")
    alpha: float = Field(0.5, gt=0.0, description="Dirichlet concentration (smaller = more label skew)")
    max_train_samples: int | None = Field(None, ge=1, description="use only the first N train samples (quick runs)")
    max_test_samples: int | None = Field(None, ge=1, description="evaluate on only the first N test samples")

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, name: str) -> str:
        from fedgc.data import DATASETS

        if name not in DATASETS:
            raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
        return name

    @field_validator("partition")
    @classmethod
    def _known_partition(cls, name: str) -> str:
        from fedgc.data.partition import PARTITIONERS

        if name not in PARTITIONERS:
            raise ValueError(f"unknown partition {name!r}; known: {', '.join(PARTITIONERS)}")
        return name
