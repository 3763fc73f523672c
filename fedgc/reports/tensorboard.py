"""TensorBoard event files for a run: ``fedgc run SCENARIO --tensorboard`` (or ``write_events(run_dir)``
on any run folder) writes ``<run>/tensorboard/`` from its ``metrics.jsonl``, the convention PyTorch
users already read (``tensorboard --logdir runs``).

Each round is one step: ``accuracy``, ``loss``, ``train_loss``, ``MB/up``, ``MB/down``, ``MB/total``
(cumulative, so a curve against bytes is one chart away), ``round/duration_s``, ``clients/…``
(selected, completed, cut, late, discarded, failed, rejected, applied) and ``density/…``. The event's
time is the round's **simulated** end (seconds since the run's start), so TensorBoard's *relative*
horizontal axis shows simulated time and its *step* axis rounds. Needs the optional ``tensorboard``
package (``pip install 'fedgc[tensorboard]'``; part of ``make test``); without it the command says so
in one line.
"""

from __future__ import annotations

from pathlib import Path

from fedgc.errors import FedgcError
from fedgc.runs.metrics import RoundRecord, read_rounds

FOLDER = "tensorboard"
MB = 1e6
CLIENT_COUNTS = ("selected", "completed", "cut", "late", "discarded", "failed", "rejected", "applied")


class TensorBoardUnavailable(FedgcError, ValueError):
    """The optional ``tensorboard`` package is not installed (one line)."""


def scalars(row: RoundRecord, totals: dict[str, float]) -> dict[str, float]:
    """The scalars of one round (``totals``: the cumulative byte counts, updated in place)."""
    totals["up"] += row.bytes_up
    totals["down"] += row.bytes_down
    out = {"MB/up": totals["up"] / MB, "MB/down": totals["down"] / MB, "MB/total": (totals["up"] + totals["down"]) / MB,
           "round/duration_s": row.round_duration_s}
    for key in ("accuracy", "loss", "train_loss"):
        if getattr(row, key) is not None:
            out[key] = getattr(row, key)
    for key in CLIENT_COUNTS:
        out[f"clients/{key}"] = getattr(row, key)
    for key, tag in (("density", "density/target"), ("achieved_density", "density/achieved"),
                     ("downlink_density", "density/downlink")):
        if getattr(row, key) is not None:
            out[tag] = getattr(row, key)
    return out


def write_events(run_dir: Path) -> Path:
    """``run_dir/tensorboard/`` from ``run_dir/metrics.jsonl`` (replacing an earlier export)."""
    try:
        from tensorboard.compat.proto.summary_pb2 import Summary  # type: ignore[import-untyped]  # no types shipped
        from torch.utils.tensorboard.writer import FileWriter
    except ImportError:
        raise TensorBoardUnavailable("--tensorboard needs the tensorboard package: pip install 'fedgc[tensorboard]'") from None
    import shutil

    rows = read_rounds(run_dir / "metrics.jsonl")
    folder = run_dir / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    totals = {"up": 0.0, "down": 0.0}
    # One event per round holding all its scalars, not ``add_scalar``'s event per scalar: each event
    # passes the writer's thread and a checksum computed in Python, and 20 a round made 10^5 rounds
    # take minutes (bench/metrics_read.py --events).
    writer = FileWriter(str(folder))
    try:
        for step, row in enumerate(rows, start=1):  # a retried round has a row per attempt: steps count rows
            values = [Summary.Value(tag=tag, simple_value=float(value)) for tag, value in scalars(row, totals).items()]
            writer.add_summary(Summary(value=values), global_step=step, walltime=row.sim_end_s)
    finally:
        writer.close()
    return folder
