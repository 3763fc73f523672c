"""Reading the network's CSV inputs (availability intervals, device capacities) with one-line errors."""

from __future__ import annotations

import csv
from pathlib import Path


def read_csv_rows(path: str | Path, what: str) -> list[dict[str, str]]:
    """The rows of a CSV with a header; ``ValueError("<what> <path>: ...")`` in one line if unreadable."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    except FileNotFoundError:
        raise ValueError(f"{what} {path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{what} {path}: cannot read ({err.__class__.__name__})") from None
