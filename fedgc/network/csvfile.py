"""Reading the network's CSV inputs (availability intervals, device capacities) with one-line errors."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from fedgc.bounded import TABLE_MAX_BYTES, read_text


def read_csv_rows(path: str | Path, what: str) -> list[dict[str, str]]:
    """The rows of a CSV with a header; ``ValueError("<what> <path>: ...")`` in one line if unreadable."""
    path = Path(path)
    text = read_text(path, what, TABLE_MAX_BYTES)
    try:
        return list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as err:
        raise ValueError(f"{what} {path}: cannot read ({err.__class__.__name__})") from None
