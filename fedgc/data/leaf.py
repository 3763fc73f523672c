"""LEAF JSON datasets (Caldas et al. 2018): naturally partitioned by user.

A LEAF root holds ``train/`` and ``test/`` folders of ``*.json`` files, each
``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}``.
The train files are partitioned by user (``partition: natural``); the test files, merged, are the
central test split for server-side evaluation.

- Shakespeare: x = 80-character strings, y = the next character; both mapped to indices in LEAF's
  80-character vocabulary ``ALL_LETTERS`` (``models/utils/language_utils.py`` in TalwalkarLab/leaf),
  so x is an int64 (n, 80) index array and there are 80 classes.
- FEMNIST: x = 784 floats (a 28×28 image, as LEAF writes it), y = one of 62 classes; x becomes
  float32 (n, 1, 28, 28).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset, DataFileError
from fedgc.data.mnist import require_dir

ALL_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
NUM_LETTERS = len(ALL_LETTERS)  # 80
_LOOKUP = np.full(max(map(ord, ALL_LETTERS)) + 1, -1, dtype=np.int64)
_LOOKUP[[ord(c) for c in ALL_LETTERS]] = np.arange(NUM_LETTERS)


@dataclass
class LeafSplit:
    """All users of one split, in file order: raw x and y lists, and the user of each sample.

    The x/y lists are the truth. LEAF's Shakespeare test files declare more ``num_samples`` than they
    hold: LEAF drops each user's first 79 test windows (they overlap the last train window) without
    updating ``num_samples``. A train split whose counts disagree is reported as a warning.
    """

    users: list[str]
    x: list[Any]
    y: list[Any]
    groups: np.ndarray  # int64 index into ``users`` per sample
    declared: list[int]  # each user's num_samples as the file states it

    def counts(self) -> list[int]:
        return cast(list[int], np.bincount(self.groups, minlength=len(self.users)).tolist())


def read_leaf_split(folder: Path) -> LeafSplit:
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise DataFileError(f"{folder}: no LEAF *.json files")
    users: list[str] = []
    xs: list[Any] = []
    ys: list[Any] = []
    groups: list[np.ndarray] = []
    declared_counts: list[int] = []
    for path in files:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            names, counts, data = doc["users"], doc["num_samples"], doc["user_data"]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataFileError(f"{path}: not readable LEAF JSON ({err.__class__.__name__})") from None
        except (KeyError, TypeError):
            raise DataFileError(f"{path}: LEAF JSON needs keys users, num_samples, user_data") from None
        if len(names) != len(counts):
            raise DataFileError(f"{path}: {len(names)} users but {len(counts)} num_samples entries")
        for name, declared in zip(names, counts):
            record = data.get(name) if isinstance(data, dict) else None
            if not isinstance(record, dict) or "x" not in record or "y" not in record:
                raise DataFileError(f"{path}: user {name!r} has no x/y in user_data")
            count = len(record["x"])
            if len(record["y"]) != count:
                raise DataFileError(f"{path}: user {name!r} has {count} x but {len(record['y'])} y")
            declared_counts.append(int(declared))
            if name in users:
                raise DataFileError(f"{path}: user {name!r} appears in more than one file")
            groups.append(np.full(count, len(users), dtype=np.int64))
            users.append(name)
            xs.extend(record["x"])
            ys.extend(record["y"])
    return LeafSplit(users, xs, ys, np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64),
                     declared_counts)


def encode_characters(texts: list[str], where: str) -> np.ndarray:
    """Strings of one length → int64 (n, length) indices into ``ALL_LETTERS``."""
    lengths = {len(t) for t in texts}
    if len(lengths) > 1:
        raise DataFileError(f"{where}: character sequences have different lengths {sorted(lengths)[:5]}")
    codes = np.frombuffer("".join(texts).encode("utf-32-le"), dtype="<u4").astype(np.int64)
    known = codes < len(_LOOKUP)
    indices = np.where(known, _LOOKUP[np.minimum(codes, len(_LOOKUP) - 1)], -1)
    if (indices < 0).any():
        bad = chr(int(codes[np.argmax(indices < 0)]))
        raise DataFileError(f"{where}: character {bad!r} is not in LEAF's 80-character vocabulary")
    return indices.reshape(len(texts), lengths.pop() if lengths else 0)


def _shakespeare_arrays(split: LeafSplit, where: str) -> ArrayDataset:
    if not all(isinstance(t, str) for t in split.x) or not all(isinstance(t, str) and len(t) == 1 for t in split.y):
        raise DataFileError(f"{where}: Shakespeare expects x strings and one-character y strings")
    return ArrayDataset(encode_characters(split.x, where), encode_characters(split.y, where)[:, 0])


def _femnist_arrays(split: LeafSplit, where: str) -> ArrayDataset:
    try:
        x = np.asarray(split.x, dtype=np.float32)
        y = np.asarray(split.y, dtype=np.int64)
    except (TypeError, ValueError):
        raise DataFileError(f"{where}: FEMNIST expects x lists of 784 numbers and integer y") from None
    if x.ndim != 2 or x.shape[1] != 784 or y.ndim != 1:
        raise DataFileError(f"{where}: FEMNIST expects x of 784 values per sample, got shape {x.shape}")
    return ArrayDataset(x.reshape(-1, 1, 28, 28), y)


@dataclass(frozen=True)
class LeafKind:
    to_arrays: Callable[[LeafSplit, str], ArrayDataset]
    num_classes: int


LEAF_KINDS: dict[str, LeafKind] = {
    "shakespeare": LeafKind(_shakespeare_arrays, NUM_LETTERS),
    "femnist": LeafKind(_femnist_arrays, 62),
}


def load_leaf_dir(root: str | Path, kind: str) -> CentralDataset:
    """Read ``root/train`` and ``root/test``; train samples keep their user as ``train_groups``."""
    root = Path(root)
    require_dir(root, "a LEAF directory with train/ and test/")
    spec = LEAF_KINDS[kind]
    train_split = read_leaf_split(root / "train")
    test_split = read_leaf_split(root / "test")
    if train_split.counts() != train_split.declared:
        warnings.warn(f"{root / 'train'}: num_samples disagrees with the x/y lists; the lists are used", stacklevel=2)
    train = spec.to_arrays(train_split, str(root / "train"))
    test = spec.to_arrays(test_split, str(root / "test"))
    for name, part in (("train", train), ("test", test)):
        if len(part) and int(part.y.max()) >= spec.num_classes:
            raise DataFileError(f"{root / name}: label {int(part.y.max())} >= {spec.num_classes} classes of {kind}")
    return CentralDataset(train, test, spec.num_classes, tuple(int(d) for d in train.x.shape[1:]),
                          train_groups=train_split.groups, group_names=train_split.users)
