"""A researcher's own dataset (``fedgc.register_dataset``; docs/api.md): arrays, a ``.npz`` file or a
torch ``Dataset`` with labels, turned into the train/test splits fedgc's partitioners (iid, dirichlet,
shards, natural with ``groups``) and evaluation take. No Flower, no fedgc.data imports here (the data
section's validator reads ``USER_DATASETS``)."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset
from fedgc.errors import FedgcError

MAX_USER_SAMPLES = 50_000_000  # a bound before anything is copied
MAX_USER_CLASSES = 2**20  # what a client's config takes (num_classes): the model's output layer is this wide


class UserDataError(FedgcError, ValueError):
    """A user dataset that fedgc cannot use; ``str(err)`` is one line naming it and the problem."""


@dataclass(frozen=True)
class UserData:
    """A dataset as arrays: features ``x`` (float32, or int64 token ids) with the first axis the sample,
    integer labels ``y`` in ``[0, num_classes)``, for a train and a test split; ``groups`` (optional,
    one integer per train sample) names each sample's natural client, for ``partition: natural``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int | None = None
    groups: np.ndarray | None = None

    @classmethod
    def from_npz(cls, path: str | Path, num_classes: int | None = None) -> UserData:
        """A ``.npz`` holding ``x_train``, ``y_train``, ``x_test``, ``y_test`` (and optionally ``groups``);
        read without pickles."""
        if not isinstance(path, (str, Path)) or not str(path) or "\0" in str(path):
            raise UserDataError(f"path: expected a .npz file's path, not {type(path).__name__}")
        try:
            with np.load(Path(path), allow_pickle=False) as f:
                missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in f.files]
                if missing:
                    raise UserDataError(f"{path}: no array {missing[0]!r} (a dataset .npz holds x_train, y_train, "
                                        "x_test, y_test and optionally groups)")
                arrays = {k: f[k] for k in ("x_train", "y_train", "x_test", "y_test", "groups") if k in f.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:  # BadZipFile: a .npz's zip is broken
            if isinstance(err, UserDataError):
                raise
            why = (str(err) or type(err).__name__).splitlines()[0][:120]
            raise UserDataError(f"{str(path)[:200]}: not a readable .npz ({why})") from None
        return cls(**arrays, num_classes=num_classes)

    @classmethod
    def from_torch(cls, train: Any, test: Any, num_classes: int | None = None) -> UserData:
        """Two torch ``Dataset``s of ``(features, label)`` pairs, read once into arrays."""

        def arrays(dataset: Any, which: str) -> tuple[np.ndarray, np.ndarray]:
            try:
                count = len(dataset)
            except TypeError:
                raise UserDataError(f"{which}: expected a torch Dataset (len and [i]), not {type(dataset).__name__}") from None
            if count > MAX_USER_SAMPLES:
                raise UserDataError(f"{which}: {count} samples, more than {MAX_USER_SAMPLES}")
            if count == 0:
                raise UserDataError(f"{which}: no samples")
            xs, ys = [], []
            for i in range(count):
                try:
                    x, y = dataset[i]
                    ys.append(int(y))
                except (TypeError, ValueError):
                    raise UserDataError(f"{which}: item {i} is not a (features, label) pair with an integer label") from None
                xs.append(np.asarray(x))
            try:
                return np.stack(xs), np.asarray(ys, dtype=np.int64)
            except ValueError as err:  # features of different shapes
                raise UserDataError(f"{which}: the features differ in shape ({str(err).splitlines()[0][:80]})") from None

        x_train, y_train = arrays(train, "train")
        x_test, y_test = arrays(test, "test")
        return cls(x_train, y_train, x_test, y_test, num_classes)

    def central(self, name: str) -> CentralDataset:
        """The checked splits; ``UserDataError`` (one line naming the dataset) when they do not fit."""
        def fail(problem: str) -> UserDataError:
            return UserDataError(f"dataset {str(name)[:200]}: {problem}")

        classes_given = self.num_classes
        if classes_given is not None and (not isinstance(classes_given, (int, np.integer)) or isinstance(classes_given, bool)
                                          or not 1 <= classes_given <= MAX_USER_CLASSES):
            raise fail(f"num_classes must be a whole number from 1 to {MAX_USER_CLASSES:,} (or None: the labels tell), "
                       f"not {str(classes_given)[:40]}")
        splits = {}
        for which, x, y in (("train", self.x_train, self.y_train), ("test", self.x_test, self.y_test)):
            try:
                x, y = np.asarray(x), np.asarray(y)
            except (ValueError, TypeError) as err:  # ragged lists, objects numpy cannot read as an array
                raise fail(f"x_{which} and y_{which} must be arrays ({str(err).splitlines()[0][:80]})") from None
            if x.ndim < 2 or y.ndim != 1 or len(x) != len(y) or len(y) == 0:
                raise fail(f"x_{which} must be (n, features...) and y_{which} (n,) with n > 0; got {x.shape}, {y.shape}")
            if len(y) > MAX_USER_SAMPLES:
                raise fail(f"{len(y)} {which} samples, more than {MAX_USER_SAMPLES}")
            if not np.issubdtype(y.dtype, np.integer):
                raise fail(f"y_{which} must hold integer labels, not {y.dtype}")
            if np.issubdtype(x.dtype, np.floating):
                x = x.astype(np.float32, copy=False)
                if not np.isfinite(x).all():
                    raise fail(f"x_{which} holds NaN or infinity")
            elif np.issubdtype(x.dtype, np.integer):
                x = x.astype(np.int64, copy=False)
            else:
                raise fail(f"x_{which} must be numbers, not {x.dtype}")
            splits[which] = ArrayDataset(np.ascontiguousarray(x), y.astype(np.int64, copy=False))
        train, test = splits["train"], splits["test"]
        if train.x.shape[1:] != test.x.shape[1:]:
            raise fail(f"train and test features differ in shape ({train.x.shape[1:]} vs {test.x.shape[1:]})")
        seen = int(max(train.y.max(), test.y.max())) + 1
        classes = self.num_classes if self.num_classes is not None else seen
        if min(train.y.min(), test.y.min()) < 0 or seen > min(classes, MAX_USER_CLASSES):
            raise fail(f"labels must lie in [0, {min(classes, MAX_USER_CLASSES)})")
        groups, names = None, None
        if self.groups is not None:
            groups = np.asarray(self.groups)
            if groups.shape != train.y.shape or not np.issubdtype(groups.dtype, np.integer) or groups.min() < 0:
                raise fail("groups must be one integer >= 0 per train sample")
            _, groups = np.unique(groups, return_inverse=True)
            names = [str(g) for g in range(int(groups.max()) + 1)]
        return CentralDataset(train, test, classes, tuple(train.x.shape[1:]), groups, names)


# name -> a UserData, or a function of no arguments returning one (called when a run loads the data)
USER_DATASETS: dict[str, UserData | Callable[[], UserData]] = {}


def load_user(name: str) -> CentralDataset:
    source = USER_DATASETS[name]
    data = source() if callable(source) else source
    if not isinstance(data, UserData):
        raise UserDataError(f"dataset {name}: its loader returned {type(data).__name__}, not fedgc.UserData")
    return data.central(name)
