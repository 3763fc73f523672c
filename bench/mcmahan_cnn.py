"""McMahan et al.'s CNN on pathological non-IID MNIST to 99% test accuracy.

    OMP_NUM_THREADS=2 .venv/bin/python bench/mcmahan_cnn.py [--out runs/mcmahan] [--stop-after-target K] [--write]
    .venv/bin/python bench/mcmahan_cnn.py --reuse --out runs/mcmahan     # figures from an existing run

Runs ``scenarios/fedavg_mnist_cnn.yaml`` (100 clients, 2 shards each, C = 0.1, E = 5, B = 10, dense
FedAvg, evaluated every round) in a child process and writes down the wall-clock moment each round's
row lands in ``metrics.jsonl`` (``times.log`` in the run folder: "rows unix_seconds" per line), so the
wall time to the target is measured, not projected. With ``--stop-after-target K`` the run is
interrupted K rounds after the target is first reached (its checkpoint lets ``python -m
fedgc.cli.run --resume`` finish it later). With ``--write``, writes the table into ``docs/results.md``
between the ``mcmahan`` markers; prints the figures as one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from results_block import write_block  # bench/ is on sys.path when a bench runs

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "fedavg_mnist_cnn.yaml"
BEGIN, END = "<!-- mcmahan:begin -->", "<!-- mcmahan:end -->"
TARGET = 0.99


def read_rows(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            break
    return rows


def first_reaching(rows: list[dict], target: float) -> dict | None:
    return next((r for r in rows if (r.get("accuracy") or 0) >= target), None)


def run(out: Path, stop_after: int | None, shared: Path) -> None:
    """Run the scenario into ``out`` (or continue it, if ``out`` has a checkpoint), logging row times."""
    resume = (out / "checkpoint.pt").is_file()
    cmd = [sys.executable, "-m", "fedgc.cli.run", "--quiet"]
    cmd += ["--resume", str(out)] if resume else [str(SCENARIO), "--out", str(out), "--overwrite",
                                                  "--set", f"data.root={shared / 'data' / 'mnist'}"]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "times.log", "a") as times, open(out / "bench.log", "a") as log:
        times.write(f"# {'resume' if resume else 'start'} {time.time():.1f}\n")
        process = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        seen = len(read_rows(out))
        while process.poll() is None:
            time.sleep(1.0)
            rows = read_rows(out)
            if len(rows) != seen:
                seen = len(rows)
                times.write(f"{seen} {time.time():.1f}\n")
                times.flush()
                hit = first_reaching(rows, TARGET)
                if stop_after is not None and hit and rows[-1]["round"] >= hit["round"] + stop_after:
                    process.send_signal(signal.SIGINT)
                    process.wait()


def row_times(out: Path) -> tuple[float | None, dict[int, float]]:
    """(start of the first run, {rows written: unix time}) from ``times.log``."""
    start, at = None, {}
    path = out / "times.log"
    for line in path.read_text().splitlines() if path.is_file() else []:
        parts = line.split()
        if parts[0] == "#":
            start = float(parts[2]) if start is None else start
        else:
            at[int(parts[0])] = float(parts[1])
    return start, at


def figures(out: Path) -> dict:
    rows = read_rows(out)
    start, at = row_times(out)
    hit = first_reaching(rows, TARGET)
    index = rows.index(hit) + 1 if hit else None
    # Steady-state wall seconds per round: the median gap between consecutive logged rows.
    gaps = sorted(at[n] - at[n - 1] for n in at if n - 1 in at)
    after = [r for r in rows if hit and r["round"] >= hit["round"]]
    return {
        "rounds_run": len(rows),
        "target": TARGET,
        "rounds_to_target": hit["round"] if hit else None,
        "sim_time_to_target_s": hit["sim_end_s"] if hit else None,
        "wall_time_to_target_s": (at[index] - start) if hit and start and index in at else None,
        "median_wall_s_per_round": gaps[len(gaps) // 2] if gaps else None,
        "best_accuracy": max((r["accuracy"] for r in rows if r.get("accuracy") is not None), default=None),
        "last_accuracy": rows[-1]["accuracy"] if rows else None,
        "share_of_rounds_at_target_after_first":
            (sum((r.get("accuracy") or 0) >= TARGET for r in after) / len(after)) if after else None,
        "mb_up_per_round": rows[0]["bytes_up"] / 1e6 if rows else None,
        "mb_down_per_round": rows[0]["bytes_down"] / 1e6 if rows else None,
        "curve": {r["round"]: r["accuracy"] for r in rows if r["round"] % 10 == 0 or r is hit},
    }


def write_results(figs: dict, path: Path) -> None:
    def pct(x):
        return "–" if x is None else f"{100 * x:.2f}%"

    hit = figs["rounds_to_target"]
    wall = figs["wall_time_to_target_s"]
    lines = [
        BEGIN,
        "`bench/mcmahan_cnn.py`, scenario `scenarios/fedavg_mnist_cnn.yaml` (evaluated on the full 10,000-image "
        "test set after every round; `OMP_NUM_THREADS=2`):",
        "",
        "| what | measured |",
        "|---|---|",
        f"| rounds to {100 * TARGET:.0f}% test accuracy | **{hit or 'not reached'}** (of {figs['rounds_run']} run) |",
        f"| simulated time to {100 * TARGET:.0f}% (LTE profile) | "
        + ("–" if hit is None else f"{figs['sim_time_to_target_s']:.0f} s ({figs['sim_time_to_target_s'] / 60:.1f} min)") + " |",
        f"| wall time to {100 * TARGET:.0f}% on this machine | "
        + ("–" if wall is None else f"{wall / 60:.0f} min") + " |",
        f"| median wall time per round | {figs['median_wall_s_per_round']:.1f} s |"
        if figs["median_wall_s_per_round"] else "| median wall time per round | – |",
        f"| best / last accuracy | {pct(figs['best_accuracy'])} / {pct(figs['last_accuracy'])} |",
        f"| rounds at ≥ {100 * TARGET:.0f}% from the first one on | "
        + ("–" if figs["share_of_rounds_at_target_after_first"] is None
           else f"{100 * figs['share_of_rounds_at_target_after_first']:.0f}%") + " |",
        f"| bytes per round | {figs['mb_up_per_round']:.1f} MB up, {figs['mb_down_per_round']:.1f} MB down |",
        "",
        "Accuracy (round: %): " + ", ".join(f"{r}: {100 * a:.2f}" for r, a in figs["curve"].items()),
        END,
    ]
    write_block(path, BEGIN, END, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "runs" / "mcmahan"))
    parser.add_argument("--reuse", action="store_true", help="only read an existing run folder")
    parser.add_argument("--stop-after-target", type=int, metavar="K",
                        help="interrupt the run K rounds after the target is first reached")
    parser.add_argument("--results", default=str(REPO / "docs" / "results.md"))
    parser.add_argument("--write", action="store_true",
                        help="write the figures into docs/results.md (--results); without it nothing there changes")
    parser.add_argument("--no-write", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for old commands
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    shared = Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared")).resolve()
    if not args.reuse:
        run(out, args.stop_after_target, shared)
    figs = figures(out)
    if args.write:
        write_results(figs, Path(args.results))
    print(json.dumps(figs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
