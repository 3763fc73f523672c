"""Readers for throughput trace files, each returning a looping :class:`PeriodicRate`.

Formats (see docs/network.md):

* ``mahimahi`` — one integer per line, a millisecond timestamp; each line is one opportunity to
  deliver a 1500-byte packet. The trace loops with period = the last timestamp (as ``mm-link``).
  Opportunities are binned per millisecond (a fluid model at 1 ms granularity), stored as runs.
* ``pensieve`` — ``t_seconds throughput`` per line (FCC / Norway HSDPA "cooked" traces). Pensieve's
  convention: sample i's throughput holds over ``(t[i-1], t[i]]``; period = last - first time.
* ``lumos`` — ``t_seconds throughput`` per line where sample i holds over ``[t[i], t[i+1])`` and the
  last one for the median step (Lumos5G per-second runs; their unit is MByte/s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from fedgc.bounded import TABLE_MAX_BYTES, read_text
from fedgc.network.piecewise import PeriodicRate

TraceFormat = Literal["mahimahi", "pensieve", "lumos"]
TraceUnit = Literal["Mbit/s", "MByte/s", "kbit/s"]

MAHIMAHI_PACKET_BITS = 1500 * 8
MAHIMAHI_MAX_MS = 2**53  # larger integers are not exact in a float64
UNIT_BPS: dict[str, float] = {"Mbit/s": 1e6, "MByte/s": 8e6, "kbit/s": 1e3}
DEFAULT_UNIT: dict[str, TraceUnit] = {"pensieve": "Mbit/s", "lumos": "MByte/s"}


def _read_numbers(path: Path, columns: int) -> np.ndarray:
    text = read_text(path, "trace file", TABLE_MAX_BYTES, encoding="ascii")
    try:
        values = np.array(text.split(), dtype=float)
    except ValueError:
        raise ValueError(f"trace file {path}: not a list of numbers") from None
    if values.size == 0 or values.size % columns:
        raise ValueError(f"trace file {path}: expected {columns} number(s) per line")
    return values.reshape(-1, columns)


def read_mahimahi(path: str | Path) -> PeriodicRate:
    """A mahimahi trace as runs of equal packets-per-millisecond: memory and time grow with the number
    of lines, not with the time span the timestamps name (a one-line ``1000000000000`` is two segments).
    The curve is the one a per-millisecond bin array gives, boundary for boundary."""
    path = Path(path)
    stamps = _read_numbers(path, 1)[:, 0]
    if np.any(stamps < 0) or np.any(stamps != np.floor(stamps)):
        raise ValueError(f"trace file {path}: mahimahi timestamps must be non-negative integers (ms)")
    if np.any(stamps > MAHIMAHI_MAX_MS):
        raise ValueError(f"trace file {path}: mahimahi timestamps must be at most {MAHIMAHI_MAX_MS} ms")
    period_ms = int(stamps.max())
    if period_ms <= 0:
        raise ValueError(f"trace file {path}: zero duration")
    busy, counts = np.unique(stamps.astype(np.int64) % period_ms, return_counts=True)
    # Segment boundaries: 0, the period, and each busy millisecond's start and end; a segment that
    # starts on a busy millisecond lasts one millisecond, any other one holds no opportunity.
    bounds = np.unique(np.concatenate(([0, period_ms], busy, busy + 1)))
    bounds = bounds[bounds <= period_ms]
    starts = bounds[:-1]
    at = np.searchsorted(busy, starts)
    hit = (at < len(busy)) & (busy[np.minimum(at, len(busy) - 1)] == starts)
    per_ms = np.where(hit, counts[np.minimum(at, len(busy) - 1)], 0)
    return PeriodicRate(bounds * 1e-3, per_ms * (MAHIMAHI_PACKET_BITS / 1e-3), str(path))


def read_pensieve(path: str | Path, unit: TraceUnit = "Mbit/s") -> PeriodicRate:
    path = Path(path)
    data = _read_numbers(path, 2)
    times = data[:, 0] - data[0, 0]
    return PeriodicRate(times, data[1:, 1] * UNIT_BPS[unit], str(path))


def read_lumos(path: str | Path, unit: TraceUnit = "MByte/s") -> PeriodicRate:
    path = Path(path)
    data = _read_numbers(path, 2)
    times = data[:, 0] - data[0, 0]
    step = float(np.median(np.diff(times))) if len(times) > 1 else 1.0
    times = np.append(times, times[-1] + (step if step > 0 else 1.0))
    return PeriodicRate(times, data[:, 1] * UNIT_BPS[unit], str(path))


def read_trace(path: str | Path, fmt: TraceFormat, unit: TraceUnit | None = None) -> PeriodicRate:
    """Read one trace file; every problem is a one-line ``ValueError`` naming the file."""
    if fmt == "mahimahi":
        return read_mahimahi(path)
    unit = unit or DEFAULT_UNIT[fmt]
    return read_pensieve(path, unit) if fmt == "pensieve" else read_lumos(path, unit)
