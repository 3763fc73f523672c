"""Device-local data: the training set a deployed client holds itself (docs/deploy-edge.md).

On a real device the client trains on its own examples, not on a partition of a dataset the
simulator splits. The on-device format is one file, ``DATA_DIR/train.npz`` (numpy's ``.npz``: a zip
of ``x.npy`` and ``y.npy``, stored or deflated), language-neutral so a JVM or Android client reads the
same file:

- ``x``: float32 (images, feature vectors) or int64 (token sequences), shape ``(n, *input_shape)``,
  exactly the model's input — already scaled and normalized as the run's dataset is;
- ``y``: integer class labels (int64; int32 and unsigned accepted), shape ``(n,)``, ``0 <= y < classes``.

``fedgc export-data`` (``fedgc.cli.export_data``) writes simulated partitions in this format, to give a
device (or a test) the very data the simulation would have given that partition.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from fedgc.data.base import ArrayDataset, DataFileError

TRAIN_FILE = "train.npz"
FEATURE_DTYPES = (np.float32, np.int64)


def _check(x: np.ndarray, y: np.ndarray, where: str) -> ArrayDataset:
    if x.dtype not in FEATURE_DTYPES:
        raise DataFileError(f"{where}: x is {x.dtype}; expected float32 (features) or int64 (tokens)")
    if x.ndim < 2:
        raise DataFileError(f"{where}: x has shape {x.shape}; expected (n, *input_shape)")
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer) or y.dtype == np.uint64:
        raise DataFileError(f"{where}: y is {y.dtype} of shape {y.shape}; expected integer labels of shape (n,)")
    if len(y) != len(x):
        raise DataFileError(f"{where}: x has {len(x)} examples but y has {len(y)} labels")
    if len(y) == 0:
        raise DataFileError(f"{where}: holds no examples")
    if y.min() < 0:
        raise DataFileError(f"{where}: y has a negative label ({int(y.min())})")
    if x.dtype == np.float32 and not np.isfinite(x).all():
        raise DataFileError(f"{where}: x holds NaN or infinite values")
    return ArrayDataset(np.ascontiguousarray(x), y.astype(np.int64))


def load_device_data(data_dir: str | Path) -> ArrayDataset:
    """The examples in ``data_dir/train.npz``; DataFileError (one line) when missing or malformed."""
    path = Path(data_dir) / TRAIN_FILE
    if path.exists() and not path.is_file():  # a stat only: a FIFO or /dev/zero is never opened
        raise DataFileError(f"no device data: {path} is not a regular file (a FIFO, socket or device is not read)")
    if not path.is_file():
        raise DataFileError(f"no device data: {path} does not exist (expected an .npz of x and y)")
    try:
        _check_declared_sizes(path)
        with np.load(path, allow_pickle=False) as npz:
            missing = {"x", "y"} - set(npz.files)
            if missing:
                raise DataFileError(f"{path}: no {' or '.join(sorted(missing))} array (it holds {sorted(npz.files)})")
            x, y = npz["x"], npz["y"]
    except DataFileError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise DataFileError(f"{path}: not a readable .npz ({err})") from None
    return _check(x, y, str(path))


def _check_declared_sizes(path: Path) -> None:
    """Each array's .npy header in the .npz declares no more bytes than its member holds: numpy
    allocates what a header declares before it reads (a 30-byte member may declare a terabyte)."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist()[:16]:
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, _, dtype = reader(member, max_header_size=10_000)
                declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if declared > info.file_size:
                    raise DataFileError(f"{path}: array {info.filename} declares {declared} bytes, its member holds "
                                        f"{info.file_size}")


def check_fits(dataset: ArrayDataset, input_shape: tuple[int, ...], num_classes: int, where: str) -> None:
    """DataFileError when the device's examples cannot feed a model of ``input_shape``/``num_classes``."""
    if tuple(dataset.x.shape[1:]) != tuple(input_shape):
        raise DataFileError(f"{where}: examples of shape {tuple(dataset.x.shape[1:])}, "
                            f"but the model takes {tuple(input_shape)}")
    if int(dataset.y.max()) >= num_classes:
        raise DataFileError(f"{where}: label {int(dataset.y.max())} out of range for {num_classes} classes")


def save_device_data(dataset: ArrayDataset, data_dir: str | Path) -> Path:
    """Write ``dataset`` as ``data_dir/train.npz`` (atomically: a reader sees the old file or the new one)."""
    directory = Path(data_dir)
    dataset = _check(np.asarray(dataset.x), np.asarray(dataset.y), str(directory / TRAIN_FILE))
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".train-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(out, x=dataset.x, y=dataset.y)
        os.replace(tmp, directory / TRAIN_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return directory / TRAIN_FILE
