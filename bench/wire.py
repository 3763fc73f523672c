"""Wire format v3 against version 1 and against the floors, side by side in one run
(docs/wire-format.md, "Format v3").

* bits per index of random sparse patterns at densities 0.01 and 0.001: version 1's index block
  (varint gaps), v3's Golomb–Rice block with the encoder's rule, with the best Rice parameter, and the
  floor (the entropy of a random pattern, H(p)/p ≈ log2(1/p) + 1.44);
* bits per value of each value encoding (scales included) against the zeroth-order entropy of its
  codes (what an ideal entropy coder of those codes would need), and the relative L2 error of what
  the receiver sees, per tensor and per block of 256;
* the whole blob of one 25.5M-entry update at density 0.001 (one tensor, as large as ResNet-50):
  dense fp32 / blob per encoding;
* encode + decode time of that update, version 1 fp32 against v3 per encoding (median of interleaved
  repeats; the target is v3 ≤ 1.5× version 1);
* the codec's per-message cost, encode and decode apart (ms, median of interleaved repeats): one
  ``mnist_2nn`` update at DGC 1 % (3 sparse matrices, 1,988 kept, and 3 dense biases, the
  cross-device round's message), and one update of 300 small tensors (100 sparse at 1 %, 200 dense
  of 16–511 entries: a deep net's biases and norms), each in version 1 and in v3 int8.

Then training runs (``--accuracy-rounds 0`` skips them): DGC at density 0.001 on
``scenarios/dgc_mnist.yaml`` (or ``--scenario``) with each ``--encodings`` value (``compression.value_dtype``:
fp32, fp16 in version 1; int8, int4, sign in v3, the rounding kept in DGC's residual) for
``--accuracy-rounds`` rounds (warm-up included) and each of ``--seeds``: final accuracy, mean ± sample
std over the seeds and its gap to the fp32-value run in points, and the whole upload message ratio
from the run's own byte counts, dense fp32 reply / compressed reply (Flower message and metrics
included), over the whole run and over the rounds at the scenario's density (after warm-up).
Each seed also gets a dense reference (``--no-dense`` skips it): the same scenario, overrides, rounds,
seed and evaluations with ``compression.name=none`` (dense fp32 updates, no DGC; the ``--set``
``compression.*`` keys that only DGC takes are dropped), and, when the scenario's DGC applies momentum
correction with momentum m and the server plain SGD, FedAvgM with server momentum m (server lr
unchanged): with every client every round and one local step that is momentum SGD on the averaged
gradient, the arithmetic of DGC's momentum correction at density 1 (the ``dense`` baseline of
bench/dgc_mnist.py). Its gap (``gap_dense_pp``, dense mean − the encoding's mean, in points) sits
beside the gap to fp32 values (``gap_pp``); a mean above the reference is a negative gap.
``ratio_whole_message`` in the JSON is that ratio of the encoding with the largest one among those whose
mean accuracy is within 0.3 points of fp32's and, when the dense runs were made, of dense's, with no
update rejected or failed; ``accuracy_gap_pp`` and ``accuracy_gap_dense_pp`` are its gaps; all only from
the runs made here, and only with at least 3 seeds. ``--set KEY=VALUE`` overrides the scenario (e.g.
``--set model.name=mnist_cnn --set compression.warmup_rounds=0``: message sizes on mnist_cnn).
``--accuracy-out DIR`` keeps each accuracy run in a run folder there (``seed<k>/<encoding>`` and
``seed<k>/dense``, evaluated every tenth of the rounds): a finished one is reused, one cut short resumed
from its checkpoint, so a long comparison can span sessions.
With ``--tta-3g`` it also measures time to target on replayed 3G with churn
(``scenarios/mnist_3g_dropouts.yaml``, needs ``FEDGC_TRACE_DIR``): the dense run and DGC uploads with
top-k model-difference downloads at each ``--tta-densities`` value both ways, with each
``--tta-encodings`` value in both directions, one seed (``--tta-seed``), ``--jobs`` runs at a time,
run folders kept under ``--tta-out`` (reused when finished). ``tta_3g_speedup`` is the dense run's
simulated time to the scenario's target over the fastest compressed run's (``tta_3g_best`` names it).
``--write`` writes what was measured into docs/results.md (``--results`` names another file): the codec
figures (``<!-- wire-codec:begin -->``: bits per index and value, the blobs, encode + decode times; not
with ``--tiny``, whose small tensors say nothing of them), the 3G
table (``<!-- wire-tta3g:begin -->``) when ``--tta-3g`` ran, and the accuracy table
(``<!-- wire-accuracy:begin -->``: the command that reproduces it, date, commit, CPU kernels, torch,
scenario, overrides, rounds and seeds; per encoding and dense the final accuracy mean ± sample std, per
seed, both gaps, the whole-message ratios and the mean reply bytes at the scenario's density; then the
verdict against 1,500x) when accuracy runs with at least 3 seeds ran. ``--write`` with neither is refused.
The last line is one JSON object.

    FEDGC_DATA_DIR=... .venv/bin/python bench/wire.py       # ~1 min + 25–90 s a 200-round run (2 shared cores)
    FEDGC_DATA_DIR=... FEDGC_TRACE_DIR=... .venv/bin/python bench/wire.py --accuracy-rounds 0 --tta-3g --write
    FEDGC_DATA_DIR=... .venv/bin/python bench/wire.py --accuracy-rounds 600 --set model.name=mnist_cnn \\
        --set compression.dense_small_tensors=false --encodings fp32,int4,sign --seeds 0,1,2 --accuracy-out DIR --write
    .venv/bin/python bench/wire.py --tiny     # a smoke run (smaller tensors, fewer repeats, 3 rounds, 1 seed)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_block import write_block  # the benches' own helper, beside this file

from fedgc.compress.payloads import DensePayload, SparsePayload
from fedgc.wire.codec import decode_bytes, encode_bytes
from fedgc.wire.golomb import encode_rice, max_rice_parameter, stream_bits
from fedgc.wire.quantize import ENCODINGS, block_count, encode_values, value_bits
from fedgc.wire.varint import encode_indices

REPO = Path(__file__).resolve().parents[1]
DENSITIES = (0.01, 0.001)
KEEPS_ACCURACY_PP = 0.3  # the issue's bar: final accuracy within 0.3 points of the fp32-value run
MIN_SEEDS = 3  # ... as a mean over at least 3 seeds
MAX_ROUNDS, MAX_SEEDS = 100_000, 20


def floor_bits_per_index(p: float) -> float:
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p)) / p


def random_pattern(n: int, density: float, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(n, max(1, math.ceil(n * density)), replace=False))


def index_figures(n: int, rng: np.random.Generator) -> dict:
    out = {}
    for p in DENSITIES:
        idx = random_pattern(n, p, rng)
        gaps = np.diff(idx, prepend=-1) - 1
        best = min(stream_bits(gaps, b) for b in range(max_rice_parameter(n) + 1))
        out[str(p)] = {"v1": 8 * encode_indices(idx, n).size / idx.size, "v3": 8 * encode_rice(idx, n).size / idx.size,
                       "v3_best_b": best / idx.size, "floor": floor_bits_per_index(p),
                       "floor_approx": math.log2(1 / p) + 1.4427}
    return out


def code_entropy(codes: torch.Tensor) -> float:
    _, counts = np.unique(codes.numpy(), return_counts=True)
    q = counts / counts.sum()
    return float(-(q * np.log2(q)).sum())


def value_figures(values: torch.Tensor) -> dict:
    out = {}
    for encoding in ENCODINGS:
        row = {}
        for block in (0, 256):
            coded = encode_values(values, encoding, block)
            err = float((coded.dequantized - values).norm() / values.norm())
            sent = value_bits(encoding) + 32 * block_count(values.numel(), block) / values.numel()
            row[f"block_{block}"] = {"bits": sent, "rel_l2_error": err,
                                     "code_entropy": None if encoding in ("fp32", "fp16") else code_entropy(coded.codes)}
        out[encoding] = row
    return out


def timed(payload: dict, shapes: dict, version: int, values: str | None) -> float:
    start = time.perf_counter()
    decode_bytes(encode_bytes(payload, version=version, values=values), shapes)
    return time.perf_counter() - start


def message_cases(rng: np.random.Generator) -> dict[str, tuple[dict, dict]]:
    """The per-message updates: mnist_2nn at DGC 1 % (its matrices sparse, its biases dense, as
    ``dense_small_tensors`` sends them) and a model of 300 small tensors (every third one sparse)."""
    twonn = {"fc1.weight": (200, 784), "fc1.bias": (200,), "fc2.weight": (200, 200), "fc2.bias": (200,),
             "fc3.weight": (10, 200), "fc3.bias": (10,)}
    many = {f"t{t}": ((int(rng.integers(64, 4096)) * 9,) if t % 3 == 0 else (int(rng.integers(16, 512)),))
            for t in range(300)}
    sparse = {"fc1.weight", "fc2.weight", "fc3.weight"} | {f"t{t}" for t in range(0, 300, 3)}
    out = {}
    for name, shapes in (("2nn_dgc_0.01", twonn), ("300_tensors", many)):
        payloads: dict = {}
        for key, shape in shapes.items():
            n = math.prod(shape)
            if key in sparse:
                k = math.ceil(n * 0.01)
                payloads[key] = SparsePayload(indices=torch.from_numpy(np.sort(rng.choice(n, k, replace=False))),
                                              values=torch.from_numpy(rng.standard_normal(k).astype(np.float32)),
                                              shape=shape)
            else:
                payloads[key] = DensePayload(values=torch.from_numpy(rng.standard_normal(n).astype(np.float32)),
                                             shape=shape)
        out[name] = (payloads, shapes)
    return out


def message_figures(rng: np.random.Generator, repeats: int) -> dict:
    """ms per encode and per decode of each message case, version 1 and v3 int8 (interleaved)."""
    cases = message_cases(rng)
    runs = [(f"{name}/{label}", payloads, shapes, version, values) for name, (payloads, shapes) in cases.items()
            for label, version, values in (("v1", 1, None), ("v3_int8", 3, "int8"))]
    blobs = {key: encode_bytes(p, version=v, values=e) for key, p, _, v, e in runs}
    times: dict[str, dict[str, list[float]]] = {key: {"encode": [], "decode": []} for key, *_ in runs}
    for _ in range(repeats):
        for key, payloads, shapes, version, values in runs:
            start = time.perf_counter()
            encode_bytes(payloads, version=version, values=values)
            middle = time.perf_counter()
            decode_bytes(blobs[key], shapes)
            times[key]["encode"].append(middle - start)
            times[key]["decode"].append(time.perf_counter() - middle)
    return {key: {"encode_ms": 1e3 * statistics.median(t["encode"]), "decode_ms": 1e3 * statistics.median(t["decode"]),
                  "blob_bytes": len(blobs[key])} for key, t in times.items()}


def mean_std(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


# compression.name: none takes these of the section; the --set compression.* keys outside them are DGC's own
NONE_COMPRESSION_KEYS = ("density", "warmup_rounds", "warmup_for", "error_feedback", "dense_small_tensors")


def dense_overrides(scenario_path: str, sets: dict) -> dict:
    """``sets`` for the dense reference: ``compression.name: none`` (the ``compression.*`` keys only DGC
    takes dropped) and, when the scenario's DGC applies momentum correction with momentum m and the server
    is plain SGD, FedAvgM with server momentum m: momentum SGD, DGC's arithmetic at density 1."""
    import fedgc

    try:
        dgc = fedgc.Scenario.from_yaml(scenario_path, dict(sets))
    except fedgc.ScenarioError as err:
        raise SystemExit(f"bench/wire.py: {err}") from None
    kept = {key: value for key, value in sets.items()
            if not key.startswith("compression.") or key.split(".", 1)[1] in NONE_COMPRESSION_KEYS}
    out = {**kept, "compression.name": "none"}
    options = dgc.compression.options
    momentum = getattr(options, "momentum", 0.0) if getattr(options, "momentum_correction", False) else 0.0
    if momentum and dgc.strategy.server_optimizer == "sgd":
        out.update({"strategy.server_optimizer": "momentum", "strategy.server_momentum": momentum})
    return out


def training_run(scenario_path: str, encoding: str, seed: int, rounds: int, sets: dict | None = None,
                 out: Path | None = None) -> dict:
    """One DGC run with ``value_dtype: encoding`` (``encoding`` "dense": the dense reference,
    ``dense_overrides``): final accuracy and the run's upload byte counts. With ``out``, in the run folder
    ``out/seed<seed>/<encoding>`` (a finished one read as it is, one cut short resumed from its checkpoint:
    long runs span sessions), else in this process."""
    import fedgc

    chosen = (dense_overrides(scenario_path, sets or {}) if encoding == "dense"
              else {**(sets or {}), "compression.value_dtype": encoding})
    overrides = {**chosen, "rounds": rounds, "seed": seed, "eval.every": rounds if out is None else max(1, rounds // 10)}
    try:
        scenario = fedgc.Scenario.from_yaml(scenario_path, overrides)
    except fedgc.ScenarioError as err:
        raise SystemExit(f"bench/wire.py: {err}") from None
    start = time.perf_counter()
    if out is None:
        run = fedgc.run(scenario)
    else:
        folder = out / f"seed{seed}" / encoding
        run_in_folder(scenario_path, overrides, folder)
        run = fedgc.load_run(folder)
    wall = time.perf_counter() - start if out is None else run.summary.wall_time_s
    target = scenario.compression.density
    # the rounds at the scenario's density (after DGC's warm-up); every round of the dense reference
    steady = [r for r in run.rounds if (encoding == "dense" or r.density == target) and r.bytes_up]
    replies = sum(len(r.client_upload_bytes) for r in steady)
    return {"encoding": encoding, "seed": seed, "rounds": rounds, "final_accuracy": run.summary.final_accuracy,
            "bytes_up": run.summary.bytes_up, "dense_bytes_up": run.summary.dense_bytes_up,
            "ratio_run": run.summary.dense_bytes_up / run.summary.bytes_up,
            "steady_rounds": len(steady),
            "ratio_at_density": (sum(r.dense_bytes_up for r in steady) / sum(r.bytes_up for r in steady)
                                 if steady else None),
            "reply_bytes_at_density": sum(r.bytes_up for r in steady) / replies if replies else None,
            "dense_sets": {k: v for k, v in chosen.items() if k not in (sets or {}) or (sets or {})[k] != v}
            if encoding == "dense" else None,
            "rejected": run.summary.updates_rejected, "failed": run.summary.clients_failed, "wall_s": wall}


def read_summary(folder: Path) -> dict:
    """``folder``'s ``summary.json``, or {} when there is none or it is not a JSON object (a run killed
    while writing it, an edited file: the run is then made again)."""
    try:
        done = json.loads((folder / "summary.json").read_text()[:1_000_000])
    except (OSError, ValueError):
        return {}
    return done if isinstance(done, dict) else {}


def run_in_folder(scenario_path: str | Path, overrides: dict, folder: Path) -> None:
    """``fedgc run`` of the scenario with ``overrides`` into ``folder``, unless it finished there already
    (the same rounds); a run there cut short (a checkpoint, interrupted or no summary) goes on from it."""
    done = read_summary(folder)
    if done.get("stopped_reason") == "completed" and done.get("rounds") == overrides["rounds"]:
        return
    if (folder / "checkpoint.pt").is_file() and done.get("stopped_reason") in (None, "interrupted"):
        cmd = [sys.executable, "-m", "fedgc.cli.run", "--resume", str(folder), "--quiet"]
    else:
        sets = [a for key, value in overrides.items() for a in ("--set", f"{key}={json.dumps(value)}")]
        cmd = [sys.executable, "-m", "fedgc.cli.run", str(scenario_path), "--out", str(folder), "--overwrite",
               "--quiet", *sets]
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.log", "a") as log:
        code = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        raise SystemExit(f"bench/wire.py: the run in {folder} failed (exit {code}): {folder.parent / folder.name}.log")


def run_figures(mine: list[dict]) -> dict:
    """Mean ± sample std of the final accuracies of ``mine`` (one entry a seed), its byte figures."""
    accuracy = [r["final_accuracy"] for r in mine]
    ratios = [r["ratio_at_density"] for r in mine if r["ratio_at_density"] is not None]
    replies = [r["reply_bytes_at_density"] for r in mine if r.get("reply_bytes_at_density") is not None]
    mean, std = mean_std(accuracy)
    return {"final_accuracy_mean": mean, "final_accuracy_std": std, "seeds": [r["seed"] for r in mine],
            "final_accuracies": accuracy,
            "ratio_run": statistics.fmean(r["ratio_run"] for r in mine),
            "ratio_at_density": statistics.fmean(ratios) if ratios else None,
            "reply_bytes_at_density": statistics.fmean(replies) if replies else None,
            "rejected": sum(r["rejected"] for r in mine), "failed": sum(r["failed"] for r in mine)}


def accuracy_figures(runs: list[dict], encodings: list[str], dense_runs: list[dict] | None = None) -> dict:
    """Per encoding: ``run_figures`` and its gaps in points, ``gap_pp`` to the fp32-value runs' mean and
    ``gap_dense_pp`` to the dense runs' mean (None without them); a mean above the reference: negative."""
    out = {}
    base = [r["final_accuracy"] for r in runs if r["encoding"] == "fp32"]
    dense = [r["final_accuracy"] for r in dense_runs or []]
    for encoding in encodings:
        f = run_figures([r for r in runs if r["encoding"] == encoding])
        f["gap_pp"] = 100 * (statistics.fmean(base) - f["final_accuracy_mean"]) if base else None
        f["gap_dense_pp"] = 100 * (statistics.fmean(dense) - f["final_accuracy_mean"]) if dense else None
        out[encoding] = f
    return out


def dense_figures(dense_runs: list[dict], runs: list[dict]) -> dict | None:
    """The dense reference's ``run_figures`` and its gap to the fp32-value runs (None without dense runs)."""
    if not dense_runs:
        return None
    f = run_figures(dense_runs)
    base = [r["final_accuracy"] for r in runs if r["encoding"] == "fp32"]
    f["gap_pp"] = 100 * (statistics.fmean(base) - f["final_accuracy_mean"]) if base else None
    f["gap_dense_pp"] = 0.0
    return f


def best_kept(figures: dict) -> tuple[str, dict] | None:
    """The encoding with the largest whole-message ratio (at the scenario's density) among those whose
    mean final accuracy is within ``KEEPS_ACCURACY_PP`` of fp32's and, when the dense runs were made
    (``gap_dense_pp`` not None), of dense's, with no update rejected or failed."""
    kept = [(e, f) for e, f in figures.items() if f["gap_pp"] is not None and f["gap_pp"] <= KEEPS_ACCURACY_PP
            and (f.get("gap_dense_pp") is None or f["gap_dense_pp"] <= KEEPS_ACCURACY_PP)
            and f["ratio_at_density"] is not None and not f["rejected"] and not f["failed"]]
    return max(kept, key=lambda item: item[1]["ratio_at_density"]) if kept else None


def accuracy_section(args: argparse.Namespace) -> dict:
    runs, dense_runs = [], []
    names = [*args.encodings, *(["dense"] if args.dense else [])]
    for seed in args.seeds:  # seed by seed, every encoding: a cut-short bench still compares like with like
        for encoding in names:
            r = training_run(args.scenario, encoding, seed, args.accuracy_rounds, args.set, args.accuracy_out)
            (dense_runs if encoding == "dense" else runs).append(r)
            print(f"  {encoding:>5} seed {seed}: final accuracy {r['final_accuracy']:.4f}, upload ratio "
                  f"{r['ratio_run']:.1f} (run) {r['ratio_at_density'] or float('nan'):.1f} (at density, "
                  f"{r['steady_rounds']} rounds), {r['wall_s']:.0f} s", flush=True)
    figures = accuracy_figures(runs, args.encodings, dense_runs)
    dense = dense_figures(dense_runs, runs)
    where = f"{args.scenario}{f' with {args.set}' if args.set else ''}"
    print(f"\nDGC on {where}, {args.accuracy_rounds} rounds, seeds {', '.join(map(str, args.seeds))}: "
          "final accuracy mean ± sample std, gaps to fp32 values and to dense, whole upload message ratio "
          "dense / compressed")
    print(f"{'values':>8} {'accuracy':>17} {'gap (pp)':>9} {'vs dense':>9} {'ratio, run':>11} {'ratio at density':>17}")
    for encoding, f in [*figures.items(), *([("dense", dense)] if dense else [])]:
        std = "—" if f["final_accuracy_std"] is None else f"{100 * f['final_accuracy_std']:.2f}"
        gap = "—" if f["gap_pp"] is None else f"{f['gap_pp']:+.2f}"
        vs_dense = "—" if f["gap_dense_pp"] is None or encoding == "dense" else f"{f['gap_dense_pp']:+.2f}"
        at = "—" if f["ratio_at_density"] is None else f"{f['ratio_at_density']:.1f}"
        print(f"{encoding:>8} {100 * f['final_accuracy_mean']:>9.2f} ± {std:<5} {gap:>9} {vs_dense:>9} "
              f"{f['ratio_run']:>11.1f} {at:>17}")
    return {"runs": runs, "figures": figures, "dense_runs": dense_runs, "dense": dense}


ACCURACY_BEGIN, ACCURACY_END = "<!-- wire-accuracy:begin -->", "<!-- wire-accuracy:end -->"
ISSUE_RATIO = 1500  # the issue's bar on the whole upload message, dense fp32 / DGC at 0.001


def reproducing_command(args: argparse.Namespace) -> str:
    """The command line that makes the accuracy block again (data and run folders as placeholders)."""
    words = [".venv/bin/python", "bench/wire.py", *(["--tiny"] if args.tiny else []),
             "--accuracy-rounds", str(args.accuracy_rounds)]
    scenario = Path(args.scenario).resolve()
    if scenario != REPO / "scenarios" / "dgc_mnist.yaml":
        words += ["--scenario", str(scenario.relative_to(REPO)) if scenario.is_relative_to(REPO) else "SCENARIO"]
    for item in args.set_items:
        words += ["--set", shlex.quote(item)]
    words += ["--encodings", ",".join(args.encodings), "--seeds", ",".join(map(str, args.seeds))]
    words += [*([] if args.dense else ["--no-dense"]),
              *(["--accuracy-out", shlex.quote(str(args.accuracy_out))] if args.accuracy_out else []), "--write"]
    return " ".join(words)  # the data from $FEDGC_DATA_DIR, or its default (README, "Data")


def dense_sets(accuracy: dict) -> str:
    """The overrides that made the dense reference, as ``--set`` items."""
    sets = accuracy["dense_runs"][0]["dense_sets"]
    return " ".join(f"`{key}={value if isinstance(value, str) else json.dumps(value)}`" for key, value in sets.items())


def percent(mean: float, std: float | None, n: int) -> str:
    return f"{100 * mean:.2f}% ± {'—' if std is None else f'{100 * std:.2f}'} ({n})"


def accuracy_block(accuracy: dict, args: argparse.Namespace, commit: str, cpu: str, torch_version: str,
                   date: str) -> str:
    """The ``--write`` accuracy block of docs/results.md (pure: from the section's figures and the arguments)."""
    figures, dense = accuracy["figures"], accuracy["dense"]
    best = best_kept(figures)
    sets = ", ".join(f"`{item}`" for item in args.set_items) or "none"
    scenario = Path(args.scenario).resolve()
    shown = scenario.relative_to(REPO) if scenario.is_relative_to(REPO) else scenario.name
    lines = [ACCURACY_BEGIN,
             f"Written by `{reproducing_command(args)}` ({date}, main at {commit}, CPU kernels {cpu}, torch "
             f"{torch_version}): `{shown}`, overrides {sets}, {args.accuracy_rounds} rounds (warm-up included), "
             f"seeds {', '.join(map(str, args.seeds))}. Each encoding is DGC at the scenario's density with that "
             "`compression.value_dtype`"
             + (f"; dense is the same with {dense_sets(accuracy)} (dense fp32 updates; server momentum, when "
                "set, is DGC's: momentum SGD, the arithmetic of DGC's momentum correction at density 1)"
                if dense else "")
             + ". Final accuracy: mean ± sample std (seeds); gaps in points, reference mean − this mean (negative: "
             "above it); the whole upload message ratio is dense fp32 reply bytes / reply bytes from the runs' own "
             "counts (Flower message and metrics included), over the run and over the rounds at the scenario's "
             "density, and B per reply is the mean reply there.",
             "",
             "| values | final accuracy | per seed | gap to fp32 (pp) | gap to dense (pp) | ratio, run | "
             "ratio at density | B per reply at density |",
             "|---|---|---|---|---|---|---|---|"]
    rows = [*figures.items(), *([("dense", dense)] if dense else [])]
    for name, f in rows:
        gap = "—" if f["gap_pp"] is None or name == "fp32" else f"{f['gap_pp']:+.2f}"
        vs_dense = "—" if f["gap_dense_pp"] is None or name == "dense" else f"{f['gap_dense_pp']:+.2f}"
        at = "—" if f["ratio_at_density"] is None else f"{f['ratio_at_density']:,.1f}×"
        reply = "—" if f["reply_bytes_at_density"] is None else f"{f['reply_bytes_at_density']:,.0f}"
        seeds = " / ".join(f"{100 * a:.2f}" for a in f["final_accuracies"])
        label = f"**{name}**" if best is not None and name == best[0] else name
        lines.append(f"| {label} | {percent(f['final_accuracy_mean'], f['final_accuracy_std'], len(f['seeds']))} | "
                     f"{seeds} | {gap} | {vs_dense} | {f['ratio_run']:,.1f}× | {at} | {reply} |")
    within = "fp32 values" + (" and of dense" if dense else " (dense not run)")
    lines.append("")
    if best is None:
        lines.append(f"No encoding kept the mean final accuracy within {KEEPS_ACCURACY_PP} points of {within} with "
                     "every update accepted: no `ratio_whole_message`.")
    else:
        name, f = best
        reaches = "reaches" if f["ratio_at_density"] >= ISSUE_RATIO else "does not reach"
        lines.append(f"Best within {KEEPS_ACCURACY_PP} points of {within}: **{name}**, whole upload message "
                     f"{f['ratio_at_density']:,.1f}× smaller than dense fp32 at the scenario's density "
                     f"(`ratio_whole_message`; gaps {f['gap_pp']:+.2f} pp to fp32"
                     + ("" if f["gap_dense_pp"] is None else f", {f['gap_dense_pp']:+.2f} pp to dense")
                     + f"): it {reaches} {ISSUE_RATIO:,}×.")
    lines.append(ACCURACY_END)
    return "\n".join(lines)


CODEC_BEGIN, CODEC_END = "<!-- wire-codec:begin -->", "<!-- wire-codec:end -->"


def codec_block(indices: dict, per_value: dict, sizes: dict, ms: dict, per_message: dict, n_update: int, kept: int,
                repeats: int, commit: str, cpu: str, date: str, command: str) -> str:
    """The ``--write`` codec block of docs/results.md (pure: from the codec section's figures and the
    command that measured them)."""
    dense = 1 + 2 + 4 * n_update
    lines = [CODEC_BEGIN,
             f"Written by `{command}` ({date}, main at {commit}, CPU kernels {cpu}; any run of the bench with "
             "`--write` but `--tiny` measures the codec and writes this block). Bits per index of random sparse "
             "patterns, v1's varint gaps against v3's Golomb–Rice block (the encoder's rule and the best "
             "parameter) and the floor H(p)/p:", "",
             "| density | v1 varint | v3 Rice (rule) | v3 Rice (best b) | floor |", "|---:|---:|---:|---:|---:|"]
    for p, row in indices.items():
        lines.append(f"| {p} | {row['v1']:.3f} | {row['v3']:.3f} | {row['v3_best_b']:.3f} | {row['floor']:.3f} |")
    lines += ["", f"Bits per value of {kept:,} values (the largest of a Gaussian, as top-k keeps them), scales "
              "included, per tensor | per block of 256, the codes' zeroth-order entropy, and the relative L2 error "
              "of what the receiver decodes:", "",
              "| values | bits | code entropy | rel. L2 error |", "|---|---|---|---|"]
    for encoding, row in per_value.items():
        a, b = row["block_0"], row["block_256"]
        entropy = "—" if a["code_entropy"] is None else f"{a['code_entropy']:.2f} \\| {b['code_entropy']:.2f}"
        lines.append(f"| {encoding} | {a['bits']:.2f} \\| {b['bits']:.2f} | {entropy} | "
                     f"{a['rel_l2_error']:.2e} \\| {b['rel_l2_error']:.2e} |")
    lines += ["", f"One update of {n_update:,} entries (one tensor, ResNet-50's size) at density 0.001 ({kept:,} kept): "
              f"the blob, dense fp32 / blob, and encode + decode (median of {repeats} interleaved repeats; v3's values "
              "quantized from fp32 inside the encode):", "",
              "| blob | bytes | dense / blob | bits per kept entry | encode + decode (ms) | vs v1 fp32 |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, size in sizes.items():
        lines.append(f"| {name} | {size:,} | {dense / size:,.1f}× | {8 * size / kept:.2f} | {ms[name]:.2f} | "
                     f"{ms[name] / ms['v1_fp32']:.2f} |")
    lines += ["", "Per message (median of interleaved repeats, ms):", "",
              "| update | blob bytes | encode | decode |", "|---|---:|---:|---:|"]
    for key, row in per_message.items():
        lines.append(f"| {key} | {row['blob_bytes']:,} | {row['encode_ms']:.3f} | {row['decode_ms']:.3f} |")
    lines.append(CODEC_END)
    return "\n".join(lines)


TTA_SCENARIO = REPO / "scenarios" / "mnist_3g_dropouts.yaml"
TTA_BEGIN, TTA_END = "<!-- wire-tta3g:begin -->", "<!-- wire-tta3g:end -->"


def tta_configs(densities: list[float], encodings: list[str]) -> dict[str, list[str]]:
    """The ``--set`` overrides of each 3G run, by name: dense, then DGC up and top-k down at each density
    both ways with each value encoding both ways."""
    configs = {"dense": ["compression.name=none"]}
    for density in densities:
        for encoding in encodings:
            configs[f"{encoding} {density:g}"] = [
                f"compression.density={density:g}", "downlink.name=topk", f"downlink.density={density:g}",
                f"compression.value_dtype={encoding}", f"downlink.value_dtype={encoding}"]
    return configs


def tta_run(name: str, sets: list[str], seed: int, out: Path, rounds: int | None) -> dict:
    """One 3G run in ``out/seed<seed>/<name>`` (``run_in_folder``): its simulated time and rounds to target."""
    folder = out / f"seed{seed}" / name.replace(" ", "_")
    overrides = {key: yaml.safe_load(value) for key, _, value in (item.partition("=") for item in sets)}
    overrides.update(seed=seed, rounds=rounds or yaml.safe_load(TTA_SCENARIO.read_text())["rounds"])
    run_in_folder(TTA_SCENARIO, overrides, folder)
    s = read_summary(folder)
    return {"name": name, "seed": seed, "time_to_target_s": s["time_to_target_s"],
            "rounds_to_target": s["rounds_to_target"], "rounds": s["rounds"], "final_accuracy": s["final_accuracy"],
            "target": s["target_accuracy"], "bytes_up": s["bytes_up"], "bytes_down": s["bytes_down"],
            "sim_time_s": s["sim_time_s"], "rejected": s["updates_rejected"], "failed": s["clients_failed"]}


def tta_section(args: argparse.Namespace) -> dict:
    configs = tta_configs(args.tta_densities, args.tta_encodings)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {name: pool.submit(tta_run, name, sets, args.tta_seed, args.tta_out, args.tta_rounds)
                   for name, sets in configs.items()}
        runs = {name: future.result() for name, future in futures.items()}
    dense = runs["dense"]["time_to_target_s"]
    for run in runs.values():
        t = run["time_to_target_s"]
        run["speedup"] = dense / t if dense and t else None
    reached = [r for n, r in runs.items() if n != "dense" and r["speedup"] is not None]
    best = max(reached, key=lambda r: r["speedup"]) if reached else None
    print(f"\ntime to {runs['dense']['target']:.0%} on replayed 3G with churn ({TTA_SCENARIO.name}, seed {args.tta_seed}): "
          "dense against DGC up + top-k down, values encoded both ways")
    print(f"{'run':>12} {'time to target':>15} {'rounds':>7} {'MB up':>8} {'MB down':>8} {'final':>7} {'speed-up':>9}")
    for name, r in runs.items():
        t = "—" if r["time_to_target_s"] is None else f"{r['time_to_target_s']:.1f} s"
        sp = "—" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        print(f"{name:>12} {t:>15} {r['rounds_to_target'] or '—':>7} {r['bytes_up'] / 1e6:>8.2f} "
              f"{r['bytes_down'] / 1e6:>8.2f} {100 * r['final_accuracy']:>6.2f}% {sp:>9}")
    return {"runs": runs, "best": None if best is None else best["name"],
            "speedup": None if best is None else best["speedup"]}


def tta_block(tta: dict, commit: str, seed: int) -> str:
    """The ``--write`` block of docs/results.md (pure: from the section's figures)."""
    runs = tta["runs"]
    dense = runs["dense"]
    lines = [TTA_BEGIN,
             f"Written by `.venv/bin/python bench/wire.py --tta-3g --write` ({datetime.date.today()}, main at {commit}, "
             f"CPU kernels {torch.backends.cpu.get_cpu_capability()}): `scenarios/mnist_3g_dropouts.yaml` (100 phones, "
             "MNIST Dirichlet α = 0.5, `mnist_2nn`, 13 selected a round for 10 updates, churn, device tiers, replayed "
             f"Norway HSDPA 3G traces), seed {seed}, simulated time to {dense['target']:.0%} test accuracy. Compressed runs: "
             "DGC uploads (plain error feedback, as the scenario) and top-k model-difference downloads at the same "
             "density, values in the same encoding both ways (v3 for int8, int4 and sign).",
             "",
             "| run | time to target | rounds to target | MB up | MB down | final accuracy | speed-up |",
             "|---|---|---|---|---|---|---|"]
    for name, r in runs.items():
        t = "not reached" if r["time_to_target_s"] is None else f"{r['time_to_target_s']:.1f} s"
        sp = "—" if r["speedup"] is None else f"{r['speedup']:.2f}×"
        sp = f"**{sp}**" if name == tta["best"] else sp
        lines.append(f"| {name} | {t} | {r['rounds_to_target'] or '—'} | {r['bytes_up'] / 1e6:.2f} | "
                     f"{r['bytes_down'] / 1e6:.2f} | {100 * r['final_accuracy']:.2f}% | {sp} |")
    if tta["best"] is not None:
        lines += ["", f"`tta_3g_speedup`: {tta['speedup']:.2f} ({tta['best']} both ways), one seed."]
    lines.append(TTA_END)
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="small tensors and 3 repeats: a smoke run")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--scenario", default=str(REPO / "scenarios" / "dgc_mnist.yaml"),
                        help="the DGC scenario of the accuracy runs (default: scenarios/dgc_mnist.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a scenario override of the accuracy runs (YAML value), e.g. model.name=mnist_cnn")
    parser.add_argument("--accuracy-rounds", type=int, default=None,
                        help="rounds of each accuracy run, warm-up included (default 200; --tiny: 3; 0: none)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds of the accuracy runs (default 0,1,2; --tiny: 0)")
    parser.add_argument("--encodings", default="fp32,fp16,int8,int4",
                        help="comma-separated value_dtype values of the accuracy runs (fp32 first: the gaps are to it)")
    parser.add_argument("--accuracy-out", type=Path, default=None,
                        help="keep the accuracy runs in run folders here (reused when finished, resumed when cut "
                             "short); default: in this process, nothing kept")
    parser.add_argument("--tta-3g", action="store_true", help="also time to target on replayed 3G (see above)")
    parser.add_argument("--tta-densities", default="0.03,0.05,0.1", help="densities of the 3G runs, both ways")
    parser.add_argument("--tta-encodings", default="fp32,int4,sign", help="value encodings of the 3G runs, both ways")
    parser.add_argument("--tta-seed", type=int, default=0)
    parser.add_argument("--tta-rounds", type=int, default=None, help="override the 3G scenario's rounds")
    parser.add_argument("--tta-out", type=Path, default=REPO / "runs" / "bench-wire-3g")
    parser.add_argument("--jobs", type=int, default=1, help="3G runs at a time (processes)")
    parser.add_argument("--no-dense", dest="dense", action="store_false",
                        help="no dense reference runs beside the accuracy runs")
    parser.add_argument("--write", action="store_true",
                        help="write what was measured (the 3G table, the accuracy table of >= 3 seeds) into "
                             "docs/results.md")
    parser.add_argument("--results", type=Path, default=REPO / "docs" / "results.md",
                        help="the file --write writes into (default docs/results.md)")
    args = parser.parse_args()
    if not 1 <= args.jobs <= 16:
        parser.error(f"--jobs must be 1 to 16, not {args.jobs}")
    if not 0 <= args.tta_seed < 2**32:
        parser.error(f"--tta-seed must be in 0…2**32−1, not {args.tta_seed}")
    if args.tta_rounds is not None and not 1 <= args.tta_rounds <= MAX_ROUNDS:
        parser.error(f"--tta-rounds must be 1 to {MAX_ROUNDS}, not {args.tta_rounds}")
    try:
        args.tta_densities = [float(d) for d in args.tta_densities[:200].split(",")]
    except ValueError:
        parser.error(f"--tta-densities: comma-separated numbers, not {args.tta_densities[:60]!r}")
    if not 1 <= len(args.tta_densities) <= 8 or not all(0 < d <= 1 for d in args.tta_densities):
        parser.error("--tta-densities: 1 to 8 densities in (0, 1]")
    args.tta_encodings = args.tta_encodings[:200].split(",")
    if not 1 <= len(args.tta_encodings) <= len(ENCODINGS) or not set(args.tta_encodings) <= set(ENCODINGS):
        parser.error(f"--tta-encodings: some of {', '.join(ENCODINGS)}")
    if not 1 <= args.repeats <= 1000:
        parser.error(f"--repeats must be 1 to 1000, not {args.repeats}")
    args.accuracy_rounds = (3 if args.tiny else 200) if args.accuracy_rounds is None else args.accuracy_rounds
    if not 0 <= args.accuracy_rounds <= MAX_ROUNDS:
        parser.error(f"--accuracy-rounds must be 0 to {MAX_ROUNDS}, not {args.accuracy_rounds}")
    seeds = (args.seeds if args.seeds is not None else ("0" if args.tiny else "0,1,2"))[:1000].split(",")
    if not 1 <= len(seeds) <= MAX_SEEDS or not all(s.strip().isdigit() and int(s) < 2**32 for s in seeds):
        parser.error(f"--seeds: 1 to {MAX_SEEDS} comma-separated integers in 0…2**32−1, not {args.seeds[:60]!r}")
    args.seeds = [int(s) for s in seeds]
    if len(set(args.seeds)) != len(args.seeds):
        parser.error("--seeds: a seed is listed twice")
    encodings = args.encodings[:200].split(",")
    if encodings[:1] != ["fp32"] or len(set(encodings)) != len(encodings) or not set(encodings) <= set(ENCODINGS):
        parser.error(f"--encodings: fp32 first, then distinct ones of {', '.join(ENCODINGS)}, not {args.encodings[:60]!r}")
    args.encodings = encodings
    if len(args.set) > 20:
        parser.error("--set: at most 20 overrides")
    sets = {}
    for item in args.set:
        key, eq, value = item[:1000].partition("=")
        if not eq or not key:
            parser.error(f"--set: KEY=VALUE, not {item[:60]!r}")
        try:
            sets[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            parser.error(f"--set {key}: not a YAML value: {value[:60]!r}")
    args.set_items, args.set = [item[:1000] for item in args.set], sets
    if args.write and not args.tta_3g and not (args.accuracy_rounds and len(args.seeds) >= MIN_SEEDS):
        parser.error(f"--write: nothing to write (give --tta-3g, or accuracy runs of at least {MIN_SEEDS} seeds)")
    return args


def main() -> None:
    args = parse_args()
    n_pattern, n_update, repeats = (200_000, 255_570, 3) if args.tiny else (4_000_000, 25_557_032, args.repeats)
    rng = np.random.default_rng(0)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    print(f"bench/wire.py, {datetime.date.today()}, main at {commit} (+ uncommitted changes if any), "
          f"CPU kernels {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}")

    indices = index_figures(n_pattern, rng)
    print(f"\nbits per index, random patterns of {n_pattern:,} entries")
    print(f"{'density':>8} {'v1 varint':>10} {'v3 rice':>8} {'best b':>7} {'floor':>7}")
    for p, row in indices.items():
        print(f"{p:>8} {row['v1']:>10.3f} {row['v3']:>8.3f} {row['v3_best_b']:>7.3f} {row['floor']:>7.3f}")

    k = math.ceil(n_update * 0.001)
    idx = torch.from_numpy(random_pattern(n_update, 0.001, rng))
    # top-k of a Gaussian update keeps its tails: values of magnitude above the (1 − p) quantile
    raw = rng.standard_normal(k * 20).astype(np.float32)
    values = torch.from_numpy(raw[np.argsort(-np.abs(raw))[:k]][rng.permutation(k)].copy())
    per_value = value_figures(values)
    print(f"\nbits per value, {k:,} values (the largest |x| of a Gaussian, as top-k keeps), blocks: per tensor | 256")
    print(f"{'encoding':>8} {'bits':>13} {'code entropy':>14} {'rel. L2 error':>20}")
    for encoding, row in per_value.items():
        a, b = row["block_0"], row["block_256"]
        ent = "—" if a["code_entropy"] is None else f"{a['code_entropy']:.2f} | {b['code_entropy']:.2f}"
        print(f"{encoding:>8} {a['bits']:>6.2f} | {b['bits']:<5.2f} {ent:>14} "
              f"{a['rel_l2_error']:>9.2e} | {b['rel_l2_error']:.2e}")

    payload = {"x": SparsePayload(indices=idx, values=values, shape=(n_update,))}
    shapes = {"x": (n_update,)}
    dense = 1 + 2 + 4 * n_update  # a version 1 dense fp32 blob: version, kind, dtype, values
    cases = [("v1_fp32", 1, None)] + [(f"v3_{e}", 3, e) for e in ENCODINGS]
    sizes = {name: len(encode_bytes(payload, version=v, values=e)) for name, v, e in cases}
    times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for _ in range(repeats):  # interleaved, so that load on the machine hits every case alike
        for name, v, e in cases:
            times[name].append(timed(payload, shapes, v, e))
    ms = {name: 1e3 * statistics.median(t) for name, t in times.items()}
    print(f"\none update of {n_update:,} entries at density 0.001 ({k:,} kept): blob, ratio to dense fp32, "
          f"encode + decode (median of {repeats})")
    print(f"{'blob':>10} {'bytes':>9} {'ratio':>8} {'bits/kept':>10} {'ms':>7} {'vs v1':>6}")
    for name, _, _ in cases:
        print(f"{name:>10} {sizes[name]:>9,} {dense / sizes[name]:>8.1f} {8 * sizes[name] / k:>10.2f} "
              f"{ms[name]:>7.2f} {ms[name] / ms['v1_fp32']:>6.2f}")
    message_repeats = 5 if args.tiny else 20 * repeats
    per_message = message_figures(rng, message_repeats)
    print(f"\nper message: encode and decode, ms (median of {message_repeats} interleaved)")
    print(f"{'update':>22} {'bytes':>9} {'encode':>7} {'decode':>7}")
    for key, row in per_message.items():
        print(f"{key:>22} {row['blob_bytes']:>9,} {row['encode_ms']:>7.3f} {row['decode_ms']:>7.3f}")
    accuracy = None
    if args.accuracy_rounds:
        print(f"\naccuracy runs: DGC on {args.scenario}, {args.accuracy_rounds} rounds, values "
              f"{', '.join(args.encodings)}{' and a dense reference' if args.dense else ''}, seeds "
              f"{', '.join(map(str, args.seeds))}", flush=True)
        accuracy = accuracy_section(args)
    best = best_kept(accuracy["figures"]) if accuracy and len(args.seeds) >= MIN_SEEDS else None
    if accuracy and len(args.seeds) < MIN_SEEDS:
        print(f"\nfewer than {MIN_SEEDS} seeds (a seed's accuracy moves by points): no ratio_whole_message")
    elif accuracy and best is None:
        print(f"\nno encoding kept the accuracy of the fp32-value runs{' and of dense' if args.dense else ''} within "
              f"{KEEPS_ACCURACY_PP} points with every update accepted: no ratio_whole_message")
    elif best is not None:
        vs_dense = "" if best[1]["gap_dense_pp"] is None else f", {best[1]['gap_dense_pp']:+.2f} points to dense"
        print(f"\nbest encoding within {KEEPS_ACCURACY_PP} points of fp32 values{' and of dense' if args.dense else ''}: "
              f"{best[0]}, whole upload message {best[1]['ratio_at_density']:.1f}x smaller than dense fp32 at the "
              f"scenario's density, {best[1]['gap_pp']:+.2f} points to fp32{vs_dense}")
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], check=False, cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    if args.write and not args.tiny:
        write_block(args.results, CODEC_BEGIN, CODEC_END,
                    codec_block(indices, per_value, sizes, ms, per_message, n_update, k, repeats,
                                f"{commit} + uncommitted changes" if dirty else commit,
                                torch.backends.cpu.get_cpu_capability(), str(datetime.date.today()),
                                " ".join([".venv/bin/python", "bench/wire.py", *map(shlex.quote, sys.argv[1:])])))
    if accuracy and args.write and len(args.seeds) >= MIN_SEEDS:
        write_block(args.results, ACCURACY_BEGIN, ACCURACY_END,
                    accuracy_block(accuracy, args, f"{commit} + uncommitted changes" if dirty else commit,
                                   torch.backends.cpu.get_cpu_capability(), torch.__version__,
                                   str(datetime.date.today())))
    elif accuracy and args.write:
        print(f"\naccuracy table not written: fewer than {MIN_SEEDS} seeds")
    tta = tta_section(args) if args.tta_3g else None
    if tta is None:
        print("\nnot measured here: tta_3g_speedup (give --tta-3g)")
    elif args.write:
        write_block(args.results, TTA_BEGIN, TTA_END, tta_block(tta, commit, args.tta_seed))
    kept = {} if best is None else {"ratio_whole_message": best[1]["ratio_at_density"],
                                    "accuracy_gap_pp": best[1]["gap_pp"],
                                    "accuracy_gap_dense_pp": best[1]["gap_dense_pp"], "best_encoding": best[0]}
    if tta is not None:
        kept.update({"tta_3g_speedup": tta["speedup"], "tta_3g_best": tta["best"], "tta_3g": tta["runs"]})
    print(json.dumps({**kept,
        "bench": "wire", "tiny": args.tiny, "commit": commit, "date": str(datetime.date.today()),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "bits_per_index": indices,
        "bits_per_value": per_value, "blob_bytes": sizes,
        "ratio_vs_dense": {name: dense / size for name, size in sizes.items()},
        "codec_ms": ms, "codec_vs_v1": {name: t / ms["v1_fp32"] for name, t in ms.items()},
        "message_codec_ms": per_message,
        "update_entries": n_update, "kept": k,
        "accuracy": None if accuracy is None else {"scenario": args.scenario, "set": args.set,
                                                   "rounds": args.accuracy_rounds,
                                                   "seeds": args.seeds, **accuracy}}))


if __name__ == "__main__":
    main()
