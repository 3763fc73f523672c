"""The handwritten digits (1,797 8×8 images, UCI's "Optical Recognition of Handwritten Digits" test set,
CC BY 4.0): the ``digits.csv.gz`` that scikit-learn ships, shipped in this package (``files/digits.json``:
its bytes in base64, because Flower's app bundles carry .json and not .gz; its notice beside it), so
``dataset: digits`` needs neither scikit-learn nor a download: it works offline and when deployed."""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import io
import json
from pathlib import Path

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset, DataFileError

DIGITS_FILE = Path(__file__).resolve().parent / "files" / "digits.json"
# The gz file's SHA-256 (scikit-learn 1.9.1's sklearn/datasets/data/digits.csv.gz, byte for byte): checked
# before it is decompressed, so what is parsed is that file and nothing larger.
DIGITS_SHA256 = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"
DIGITS_BYTES = 57_523
DIGITS_JSON_MAX_BYTES = 80_000  # the JSON around it (base64 is 4/3 of the bytes): read no further


def load_digits_dataset(rng: np.random.Generator, test_fraction: float = 0.2) -> CentralDataset:
    """A seeded ``test_fraction`` of the images is the test split, the rest the train split."""
    images, target = digits_arrays()
    x = (images.astype(np.float32) / 16.0)[:, None, :, :]
    y = target.astype(np.int64)
    order = rng.permutation(len(y))
    n_test = round(len(y) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return CentralDataset(ArrayDataset(x[train], y[train]), ArrayDataset(x[test], y[test]), 10, (1, 8, 8))


def digits_arrays(path: Path = DIGITS_FILE) -> tuple[np.ndarray, np.ndarray]:
    """The images (float64, 1,797 × 8 × 8) and labels (int) of ``sklearn.datasets.load_digits()``, bit for
    bit: its own file read as its loader reads it (``np.loadtxt`` of the decompressed CSV), without
    scikit-learn. A file that is not that one (another size or checksum: a damaged install) is a
    one-line ``DataFileError``."""
    damaged = f"dataset digits: {path} is not the digits file fedgc ships (size or SHA-256 differs); reinstall fedgc"
    try:
        with path.open("rb") as handle:
            stored = handle.read(DIGITS_JSON_MAX_BYTES + 1)  # bounded: never more than the file fedgc ships
    except OSError as err:
        raise DataFileError(f"dataset digits: cannot read {path} ({err.strerror or err}); reinstall fedgc") from None
    try:
        if len(stored) > DIGITS_JSON_MAX_BYTES:
            raise ValueError("too large")
        raw = base64.b64decode(json.loads(stored)["csv_gz_base64"], validate=True)
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise DataFileError(damaged) from None
    if len(raw) != DIGITS_BYTES or hashlib.sha256(raw).hexdigest() != DIGITS_SHA256:
        raise DataFileError(damaged)
    with gzip.open(io.BytesIO(raw), mode="rt", encoding="utf-8") as text:
        data = np.loadtxt(text, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
