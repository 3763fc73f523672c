"""Benchmark: reading a run's ``metrics.jsonl`` back, at growing sizes (``fedgc.runs.metrics.read_rounds``).

For each size N it writes a run folder of N rounds (rows as a 10-client DGC run writes them:
applied nodes, per-client upload sizes and times, densities; about 900 bytes a row), then times the
three readers of those rows:

- ``report``: what ``fedgc report`` reads of a run folder (``run_reports.read_run``: ``summary.json``,
  every row of ``metrics.jsonl``, ``scenario.yaml``) and the row it makes of it;
- ``tensorboard``: the rows read and turned into each round's scalars (``tensorboard.scalars``), what
  ``--tensorboard`` computes before its event writer (``--events`` also times ``write_events`` whole,
  the writer included, where the ``tensorboard`` package is installed);
- ``resume``: ``--resume``'s reading of the rows up to the checkpoint (``read_rounds(path, N)``), and
  apart (``resume_rewrite``) the rewrite of the file from those rows (``MetricsLog``).

Each figure is rows per second (best of ``--repeat``); ``linearity`` is, per reader, the time per row
at the largest size over that at the smallest (1.0: linear; a reader that is quadratic shows it grow
with the ratio of the sizes).

    .venv/bin/python bench/metrics_read.py [--rows 1000,10000] [--repeat 1] [--events]
    .venv/bin/python bench/metrics_read.py --rows 10000,100000,1000000    # the figures in bench/README.md

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from fedgc.runs.metrics import MetricsLog, RoundRecord, read_rounds, write_summary

CLIENTS = 10


def row(number: int) -> RoundRecord:
    """Round ``number`` of a 10-client DGC run, every list and optional field filled as a run fills them."""
    nodes = [(number * 7 + i * 13) % 100 for i in range(CLIENTS)]
    return RoundRecord(
        round=number, sim_start_s=10.0 * (number - 1), sim_end_s=10.0 * number - 0.123456789,
        round_duration_s=9.876543210, selected=CLIENTS + 2, completed=CLIENTS, late=1, cut=1, applied=CLIENTS,
        bytes_down=CLIENTS * 6_653_480, bytes_up=CLIENTS * 66_535, dense_bytes_up=CLIENTS * 6_653_480,
        density=0.001, achieved_density=0.00099875, train_loss=2.0 / number ** 0.5, accuracy=1.0 - 1.0 / (number + 1),
        loss=1.0 / number ** 0.5, mean_download_s=1.234567, mean_compute_s=5.678901, mean_upload_s=0.123456,
        max_upload_s=0.234567, rejected_reasons={}, applied_nodes=nodes,
        client_upload_bytes=[66_535 + i for i in range(CLIENTS)],
        client_upload_s=[round(0.1 + i / 997, 4) for i in range(CLIENTS)])


def write_run(folder: Path, rows: int) -> float:
    """A run folder of ``rows`` rounds; returns the seconds writing ``metrics.jsonl`` took."""
    folder.mkdir(parents=True)
    (folder / "scenario.yaml").write_text("name: metrics-read\nseed: 0\ncompression: {name: dgc}\n")
    started = time.perf_counter()
    with (folder / "metrics.jsonl").open("w", encoding="utf-8") as f:  # MetricsLog's lines, the rows not kept
        for number in range(1, rows + 1):
            f.write(MetricsLog._line(row(number)))
    took = time.perf_counter() - started
    # The summary's sums are not what is timed here: it is made from the last row alone.
    write_summary(folder / "summary.json", MetricsLog(None, [row(rows)]).summarize("metrics-read", 0.9, took))
    return took


def read_report(folder: Path, rows: int) -> None:
    from fedgc.reports.run_reports import read_run, report_row

    run = read_run(folder)
    assert len(run.rows) == rows
    report_row(run)


def read_tensorboard(folder: Path, rows: int) -> None:
    from fedgc.reports.tensorboard import scalars

    totals = {"up": 0.0, "down": 0.0}
    count = sum(len(scalars(r, totals)) for r in read_rounds(folder / "metrics.jsonl"))
    assert count >= rows


def read_resume(folder: Path, rows: int) -> None:
    assert len(read_rounds(folder / "metrics.jsonl", rows)) == rows


def best(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(folder: Path, size: int, readers: list[str], repeat: int) -> tuple[dict, dict[str, float]]:
    """Write a run folder of ``size`` rows, time each reader on it (best of ``repeat``), remove it."""
    write_s = write_run(folder, size)
    written = {"write_s": round(write_s, 3), "bytes": (folder / "metrics.jsonl").stat().st_size}
    kept = read_rounds(folder / "metrics.jsonl", size)  # what a resume rewrites the file from
    took = {"resume_rewrite": best(partial(MetricsLog, folder / "metrics.jsonl", kept), repeat)}
    del kept  # not held while the others read (10^6 rows are gigabytes of objects)
    calls = {"report": lambda: read_report(folder, size), "tensorboard": lambda: read_tensorboard(folder, size),
             "resume": lambda: read_resume(folder, size), "tensorboard_export": lambda: export_events(folder)}
    took.update({name: best(calls[name], repeat) for name in readers if name in calls})
    shutil.rmtree(folder)
    return written, {name: took[name] for name in readers}


def export_events(folder: Path) -> None:
    from fedgc.reports.tensorboard import write_events

    write_events(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000,10000", help="comma-separated sizes (default 1000,10000)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per reader and size; the best counts")
    parser.add_argument("--events", action="store_true", help="also time the whole TensorBoard export")
    args = parser.parse_args(argv)
    try:
        sizes = sorted({int(n) for n in args.rows.split(",")})
    except ValueError:
        parser.error(f"--rows {args.rows!r}: not comma-separated integers")
    if not sizes or sizes[0] < 1 or sizes[-1] > 10**7 or not 1 <= args.repeat <= 100:
        parser.error("--rows: sizes from 1 to 10^7; --repeat: 1 to 100")
    readers = ["report", "tensorboard", "resume", "resume_rewrite"]
    if args.events:
        try:
            import tensorboard  # noqa: F401
        except ImportError:
            print("--events: the tensorboard package is not installed; the export is not timed", file=sys.stderr)
        else:
            readers.append("tensorboard_export")
    seconds: dict[str, dict[int, float]] = {name: {} for name in readers}
    written: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="fedgc-metrics-read-") as tmp:
        measure(Path(tmp) / "warm-up", 10, readers, 1)  # imports and first uses, out of the figures
        for size in sizes:
            folder = Path(tmp) / f"run-{size}"
            written[size], took = measure(folder, size, readers, args.repeat)
            for name in readers:
                seconds[name][size] = took[name]
            print(f"{size:>9,} rows ({written[size]['bytes'] / 1e6:,.1f} MB): " + ", ".join(
                f"{name} {took[name]:.2f} s ({size / took[name]:,.0f} rows/s)" for name in readers), flush=True)
    small, large = sizes[0], sizes[-1]
    figures = {
        "sizes": sizes, "repeat": args.repeat, "written": {str(n): w for n, w in written.items()},
        "seconds": {name: {str(n): round(s, 4) for n, s in by.items()} for name, by in seconds.items()},
        "rows_per_s": {name: {str(n): round(n / s) for n, s in by.items()} for name, by in seconds.items()},
        # time per row at the largest size over the smallest: 1.0 is linear
        "linearity": {name: round((by[large] / large) / (by[small] / small), 3) for name, by in seconds.items()},
        "size_ratio": large // small,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),  # the largest size's
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
