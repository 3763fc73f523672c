"""Any MNIST-format directory: four IDX files, gzip-compressed or not (MNIST, Fashion-MNIST, KMNIST).

The files are found by their standard names (``train-images-idx3-ubyte.gz``, ...), with or without
the ``.gz`` suffix.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from fedgc.data.base import ArrayDataset, CentralDataset, DataFileError
from fedgc.fetch.hint import fetch_hint

FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# Normalization used by the reference PyTorch MNIST example (applied to every MNIST-format set
# so the same scenario keys work for each; the models learn any remaining offset).
MEAN, STD = 0.1307, 0.3081

__all__ = ["FILES", "DataFileError", "load_mnist_dir", "read_idx", "require_dir"]


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (optionally gzip-compressed): magic, dims (big-endian uint32), uint8 data."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise DataFileError(f"{path}: cannot read ({err})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataFileError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise DataFileError(f"{path}: IDX header truncated")
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise DataFileError(f"{path}: header says {tuple(int(d) for d in dims)} but holds {data.size} bytes")
    return data.reshape(tuple(dims))


def _find(root: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (root / name).is_file():
            return root / name
    return None


def require_dir(root: Path, what: str) -> None:
    """A one-line DataFileError unless ``root`` is a directory (saying whether it is a file or missing)."""
    if root.is_dir():
        return
    if root.exists():
        raise DataFileError(f"data.root {root}: is a file, not a directory (expected {what})")
    raise DataFileError(f"data.root {root}: no such directory (expected {what}){fetch_hint(root)}")


def load_mnist_dir(root: str | Path) -> CentralDataset:
    root = Path(root)
    require_dir(root, "a directory with the four IDX files")
    paths = {key: _find(root, stem) for key, stem in FILES.items()}
    missing = [FILES[key] + ".gz" for key, path in paths.items() if path is None]
    if missing:
        raise DataFileError(f"data.root {root}: missing {', '.join(missing)}{fetch_hint(root / missing[0])}")
    arrays = {key: read_idx(path) for key, path in paths.items() if path is not None}
    for split in ("train", "test"):
        split_images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if split_images.ndim != 3 or labels.ndim != 1 or len(split_images) != len(labels):
            raise DataFileError(f"data.root {root}: {split} images {split_images.shape} and labels {labels.shape} "
                                "do not match (expected (n, h, w) and (n,))")

    def images(a: np.ndarray) -> np.ndarray:
        return ((a.astype(np.float32) / 255.0 - MEAN) / STD)[:, None, :, :]

    train = ArrayDataset(images(arrays["train_images"]), arrays["train_labels"].astype(np.int64))
    test = ArrayDataset(images(arrays["test_images"]), arrays["test_labels"].astype(np.int64))
    num_classes = int(max(train.y.max(initial=0), test.y.max(initial=0))) + 1
    return CentralDataset(train, test, max(num_classes, 10), tuple(int(d) for d in train.x.shape[1:]))
