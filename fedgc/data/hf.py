"""Any Hugging Face image-classification dataset, fetched through flwr-datasets' ``FederatedDataset``.

Named in a scenario as ``dataset: hf:<id>`` (e.g. ``hf:uoft-cs/cifar10``, ``hf:ylecun/mnist``,
``hf:flwrlabs/femnist``), with options under ``data.huggingface``. The train split is read whole and
partitioned by fedgc's own partitioners (the same code as every offline dataset, so a partition is
the same for a seed whichever source the data came from); the test split is the central test set.
flwr-datasets is the extra ``fedgc[datasets]``: without it the loader refuses in one line before it
asks the Hub anything (``fedgc.data.optional``).

Offline behaviour: before anything else the Hub (``$HF_ENDPOINT`` or https://huggingface.co) is
asked about the dataset with one HTTP HEAD request bounded by ``huggingface.timeout_s`` seconds
(name lookup included, in a daemon thread), so a machine without network gets a one-line
``DataFileError`` within a few seconds, never a hang (huggingface_hub itself would retry for
half a minute), and a misspelt id is reported as such. With ``HF_HUB_OFFLINE=1`` (or
``HF_DATASETS_OFFLINE=1``) the probe is skipped and the copy in the local Hugging Face cache is used.
"""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fedgc.data.base import ArrayDataset, CentralDataset, DataFileError
from fedgc.data.optional import HF_PREFIX, require

PREFIX = HF_PREFIX
IMAGE_KEYS = ("image", "img", "pixel_values")
LABEL_KEYS = ("label", "labels", "fine_label", "character", "y")


class HuggingFaceConfig(BaseModel):
    """Options for ``dataset: hf:<id>`` (any Hugging Face image-classification dataset)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    subset: str | None = Field(None, description="the dataset's configuration (subset) name, if it has several")
    train_split: str = "train"
    test_split: str = "test"
    image_key: str | None = Field(None, description="image column; default: the first of image, img, pixel_values")
    label_key: str | None = Field(None, description="label column; default: the first of label, labels, "
                                                    "fine_label, character, y")
    group_key: str | None = Field(None, description="column of natural client ids (e.g. writer_id) "
                                                    "for partition: natural")
    timeout_s: float = Field(3.0, gt=0.0, le=60.0, description="connect timeout of the network probe")


def _offline_requested() -> bool:
    return any(os.environ.get(var, "").lower() in {"1", "true", "yes", "on"}
               for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def probe_hub(endpoint: str, dataset_id: str, timeout_s: float) -> str | None:
    """``None`` when the Hub answers an HTTP request about ``dataset_id`` within ``timeout_s``, else why not.

    A real HTTP request, not a bare TCP connect (sandboxes and proxies may accept any connect); run
    in a daemon thread so a slow name lookup cannot stretch the bound either.
    """
    outcome: list[str | None] = []

    def probe() -> None:
        request = urllib.request.Request(f"{endpoint}/api/datasets/{dataset_id}", method="HEAD")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s):
                outcome.append(None)
        except urllib.error.HTTPError as err:  # the Hub answered
            outcome.append(f"no dataset {dataset_id!r} on {endpoint}" if err.code == 404 else None)
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", err)
            outcome.append(f"cannot reach {endpoint} ({reason}; no network?)")

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout_s + 0.5)
    return outcome[0] if outcome else f"cannot reach {endpoint} within {timeout_s:g} s (no network?)"


def _pick(columns: list[str], wanted: str | None, candidates: tuple[str, ...], what: str, name: str) -> str:
    if wanted:
        if wanted not in columns:
            raise DataFileError(f"data.huggingface.{what}_key: {name} has no column {wanted!r} "
                                f"(columns: {', '.join(columns)})")
        return wanted
    for key in candidates:
        if key in columns:
            return key
    raise DataFileError(f"data.huggingface.{what}_key: none of {', '.join(candidates)} in {name} "
                        f"(columns: {', '.join(columns)}); name the column")


def _images(values: Any) -> np.ndarray:
    """A column of PIL images or arrays → float32 (n, channels, height, width) in [0, 1]."""
    arrays = [np.asarray(v) for v in values]
    x = np.stack(arrays).astype(np.float32)
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[-1] in (1, 3, 4) and x.shape[1] not in (1, 3, 4):
        x = x.transpose(0, 3, 1, 2)
    if x.ndim != 4:
        raise DataFileError(f"data.huggingface.image_key: expected 2-D or 3-D images, got shape {x.shape[1:]}")
    return x / 255.0 if x.max(initial=0.0) > 1.0 else x


def load_hf(dataset: str, options: HuggingFaceConfig) -> CentralDataset:
    name = dataset.removeprefix(PREFIX)
    require("data.dataset", dataset)  # before the Hub is asked: without flwr-datasets nothing could load
    if not _offline_requested():
        problem = probe_hub(hub_endpoint(), name, options.timeout_s)
        if problem:
            raise DataFileError(f"data.dataset {dataset}: {problem}; use an offline dataset, "
                                "or HF_HUB_OFFLINE=1 for a copy in the Hugging Face cache")
    from flwr_datasets import FederatedDataset  # type: ignore[import-untyped]  # flwr-datasets ships no py.typed

    try:
        fds = FederatedDataset(dataset=name, subset=options.subset, partitioners={options.train_split: 1},
                               shuffle=False)
        splits = {split: fds.load_split(split) for split in (options.train_split, options.test_split)}
    except Exception as err:  # noqa: BLE001 - any loader failure becomes one line naming the dataset
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise DataFileError(f"data.dataset {dataset}: cannot load from Hugging Face "
                            f"({err.__class__.__name__}: {first})") from None
    train_ds = splits[options.train_split]
    columns = list(train_ds.column_names)
    image_key = _pick(columns, options.image_key, IMAGE_KEYS, "image", name)
    label_key = _pick(columns, options.label_key, LABEL_KEYS, "label", name)
    arrays = {split: ArrayDataset(_images(ds[image_key]), np.asarray(ds[label_key], dtype=np.int64))
              for split, ds in splits.items()}
    train, test = arrays[options.train_split], arrays[options.test_split]
    mean = train.x.mean(axis=(0, 2, 3), keepdims=True)
    std = train.x.std(axis=(0, 2, 3), keepdims=True) + 1e-7
    train, test = (ArrayDataset(((d.x - mean) / std).astype(np.float32), d.y) for d in (train, test))
    feature = train_ds.features.get(label_key)
    num_classes = int(getattr(feature, "num_classes", 0) or int(max(train.y.max(), test.y.max())) + 1)
    groups, names = None, None
    if options.group_key:
        raw = np.asarray(train_ds[_pick(columns, options.group_key, (), "group", name)])
        uniques, groups = np.unique(raw, return_inverse=True)
        names = [str(u) for u in uniques]
    return CentralDataset(train, test, num_classes, tuple(int(d) for d in train.x.shape[1:]),
                          train_groups=groups, group_names=names)
