"""Files ``fedgc fetch`` computes from downloaded ones rather than downloads.

``traces/fedscale/client_device_capacity_ul_dl.csv``: the 10,000 records of the pickle
``client_device_capacity_ul_dl`` (eqfy/fl-experiments) as CSV, written exactly as the shared folder's
copy (floats with ``repr``), so its SHA-256 is checked like a downloaded file's. The pickle is read
with an unpickler that allows only the two numpy globals it needs (never a general ``pickle.load``).
"""

from __future__ import annotations

import pickle
from pathlib import Path

COLUMNS = ("computation", "communication", "dl_kbps", "ul_kbps")
HEADER = "client_index,computation_ms_per_sample,communication_kbps,dl_kbps,ul_kbps"


class _NumpyScalarsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        import numpy as np

        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if name == "scalar" and module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            core = getattr(np, "_core", None) or np.core
            return core.multiarray.scalar
        raise pickle.UnpicklingError(f"refusing global {module}.{name}")


def fedscale_csv(source: Path) -> bytes:
    with source.open("rb") as handle:
        records = _NumpyScalarsOnly(handle).load()
    if not isinstance(records, dict):
        raise TypeError(f"{source}: expected a dict of client records")
    lines = [HEADER]
    for key in sorted(records):
        record = records[key]
        lines.append(",".join([str(int(key))] + [repr(float(record[c])) for c in COLUMNS]))
    return ("\n".join(lines) + "\n").encode()


DERIVE = {"traces/fedscale/client_device_capacity_ul_dl.csv": fedscale_csv}
