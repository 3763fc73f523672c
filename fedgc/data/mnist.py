"""Any MNIST-format directory: the four standard IDX ``.gz`` files (MNIST, Fashion-MNIST, ...)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset

FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
# Normalization used by the reference PyTorch MNIST example.
MEAN, STD = 0.1307, 0.3081


class DataFileError(ValueError):
    """A data file is missing or not in the expected format."""


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (optionally gzip-compressed): magic, dims (big-endian uint32), uint8 data."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise DataFileError(f"{path}: cannot read ({err})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataFileError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise DataFileError(f"{path}: header says {tuple(dims)} but holds {data.size} bytes")
    return data.reshape(tuple(dims))


def load_mnist_dir(root: str | Path) -> CentralDataset:
    root = Path(root)
    missing = [name for name in FILES.values() if not (root / name).is_file()]
    if missing:
        raise DataFileError(f"data.root {root}: missing {', '.join(missing)}")
    arrays = {key: read_idx(root / name) for key, name in FILES.items()}

    def images(a: np.ndarray) -> np.ndarray:
        return ((a.astype(np.float32) / 255.0 - MEAN) / STD)[:, None, :, :]

    train = ArrayDataset(images(arrays["train_images"]), arrays["train_labels"].astype(np.int64))
    test = ArrayDataset(images(arrays["test_images"]), arrays["test_labels"].astype(np.int64))
    return CentralDataset(train, test, 10, (1, 28, 28))
