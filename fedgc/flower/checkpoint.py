"""Resumable run state: everything a run needs to continue exactly where it stopped.

A checkpoint is ``{part: part.state_dict()}`` for every stateful part of the run (``PARTS``): the run
itself (rounds done, metrics rows, the global model), the strategy (selection generator,
acknowledgement book), the server optimizer, the network model (links, devices, availability and the
simulated clock), the downlink stage (the server's per-client replicas; None without downlink
compression) and the transport (every client's ``Context.state``: compression memory, pending
updates, downlink replica). Each part owns its state; nothing here reads another object's fields.
It is written to ``checkpoint.pt.tmp``, flushed to disk and renamed over ``checkpoint.pt``: a crash
at any moment leaves either the previous checkpoint or the new one, never a torn file.

Format 3 holds only plain data (``fedgc.flower.plain_state``) and is read with
``torch.load(weights_only=True)``: opening a checkpoint never runs code from it. It also holds the
scenario it was written for and its fingerprint (``fedgc.flower.resume_check``), so a resume with an
edited scenario is refused unless the change is one that ``RESUMABLE`` allows.

The clients' states come from the transport: the inline grid holds them in this process; on Flower's
runtimes the partition grid asks each node for its ``Context.state`` and hands it back on resume.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from fedgc.flower.plain_state import PlainStateError, from_plain, to_plain
from fedgc.run_folder import CHECKPOINT

# 1: pickled objects; 2: one flat record of every part's fields; 3: {part: part.state_dict()}.
FORMAT_VERSION = 3
PARTS = ("run", "strategy", "optimizer", "network", "downlink", "transport")


class CheckpointError(ValueError):
    """A run folder cannot be resumed; ``str(err)`` is one line."""


def run_state(rounds_done: int, metrics_rows: int, weights: dict[str, torch.Tensor]) -> dict:
    """The run's own part: rounds completed, rows of metrics.jsonl up to the checkpoint (a retried
    round has a row per attempt) and the global model then."""
    return {"round": rounds_done, "metrics_rows": metrics_rows, "weights": dict(weights)}


def save(run_dir: Path, state: dict[str, dict | None], scenario: dict) -> Path:
    """``state``: ``{part: state_dict}`` for every name in ``PARTS``; ``scenario``:
    ``resume_check.scenario_record(...)`` of the run's scenario."""
    path = run_dir / CHECKPOINT
    tmp = run_dir / (CHECKPOINT + ".tmp")
    payload = {"format": FORMAT_VERSION, "scenario": scenario, "state": to_plain(state)}
    with tmp.open("wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the new one
    return path


def load(run_dir: Path) -> tuple[dict, dict]:
    """The checkpoint's ``{part: state}`` and the scenario record it was written for. Read with
    ``weights_only=True``: a file holding anything but plain data is refused, and nothing in it runs."""
    path = run_dir / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(f"--resume {run_dir}: no {CHECKPOINT} in that folder (checkpoint_every=0, "
                              "or the run stopped before its first checkpoint)")
    try:
        payload = torch.load(path, weights_only=True)
    except Exception as err:  # noqa: BLE001 — any unreadable file gets a one-line answer
        if "weights only load failed" in str(err).lower():
            raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} is not a plain-data checkpoint (refused "
                                  "unread: it is damaged, or holds objects whose loading could run code)") from None
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} is unreadable ({type(err).__name__})") from None
    version = payload.get("format") if isinstance(payload, dict) else None
    if version != FORMAT_VERSION:
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} has format {version!r}, this fedgc reads "
                              f"format {FORMAT_VERSION} only (start the run again)")
    try:
        state = from_plain(payload["state"])
        scenario = payload["scenario"]
        if not isinstance(scenario, dict) or not isinstance(state, dict) or set(state) != set(PARTS):
            raise TypeError
        run = state["run"]
        if not all(type(run[k]) is int and run[k] >= 0 for k in ("round", "metrics_rows")):
            raise TypeError
    except PlainStateError as err:
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT}: {err}") from None
    except (KeyError, TypeError):
        raise CheckpointError(f"--resume {run_dir}: {CHECKPOINT} is malformed") from None
    return state, scenario


def resumable(run_dir: Path, scenario) -> dict:
    """The checkpoint's state, once it is known to belong to ``scenario`` (else one-line ``CheckpointError``)."""
    from fedgc.flower.resume_check import refusal

    state, saved_scenario = load(run_dir)
    refused = refusal(saved_scenario, scenario, state["run"]["round"])
    if refused is not None:
        raise CheckpointError(f"--resume {run_dir}: {refused}")
    return state


def model_mismatch(weights: object, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """How a checkpoint's weights fail to fit the model (``shapes``), or None when they fit."""
    if not isinstance(weights, dict) or not all(isinstance(w, torch.Tensor) for w in weights.values()):
        return "its model weights are not tensors"
    missing, extra = sorted(set(shapes) - set(weights)), sorted(set(weights) - set(shapes))
    if missing or extra:
        return f"its model has {'no ' + missing[0] if missing else 'an unknown ' + extra[0]}"
    for name, shape in shapes.items():
        if tuple(weights[name].shape) != tuple(shape):
            return f"its {name} has shape {tuple(weights[name].shape)}, the model's has {tuple(shape)}"
    return None


def _buffers_fit(buffers: object, shapes: dict[str, tuple[int, ...]]) -> bool:
    """Server optimizer buffers are named ``<slot>/<parameter>`` and shaped like their parameter."""
    return isinstance(buffers, dict) and all(
        isinstance(b, torch.Tensor) and k.partition("/")[2] in shapes
        and tuple(b.shape) == tuple(shapes[k.partition("/")[2]]) for k, b in buffers.items())


def restore(state: dict, parts: dict, shapes: dict[str, tuple[int, ...]]) -> None:
    """Load every part's state into a freshly built run (``parts``: ``{name: object with
    load_state_dict}``, None for a part the run does not have); one ``CheckpointError`` line if it
    does not fit."""
    mismatch = model_mismatch(state["run"].get("weights"), shapes)
    if mismatch is None and not _buffers_fit((state["optimizer"] or {}).get("buffers"), shapes):
        mismatch = "its server optimizer buffers do not fit the model"
    if mismatch is not None:
        raise CheckpointError(f"{CHECKPOINT} does not fit this scenario's model: {mismatch}")
    for name, part in parts.items():
        if (state[name] is None) != (part is None):
            raise CheckpointError(f"{CHECKPOINT} and the scenario disagree on the {name} part")
        if part is None:
            continue
        try:
            part.load_state_dict(state[name])
        except (TypeError, KeyError, AttributeError, ValueError, IndexError) as err:
            why = str(err).splitlines()[0] if isinstance(err, ValueError) and str(err) else "its saved state does not fit this run"
            raise CheckpointError(f"{CHECKPOINT} is malformed ({name}: {why})") from None
