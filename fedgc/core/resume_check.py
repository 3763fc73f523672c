"""What a resume may change: the scenario a checkpoint was written for against ``scenario.yaml`` now.

A checkpoint stores the scenario as flat ``dotted.key: value`` fields and a SHA-256 fingerprint of
those fields minus ``RESUMABLE``. A resume whose scenario has another fingerprint is refused with one
line naming the changed fields: the restored state (network sample paths, model, compression memory)
was built from the old values, so the run would silently not be what its ``scenario.yaml`` says.

Allowed changes (``RESUMABLE``): ``rounds`` may be raised, which extends the run (a completed run
continues from its last checkpoint to the new last round, and its metrics are those of a run started
with the new ``rounds``). It may be lowered only down to the last round the run has written (its
checkpoint's, or a later row of ``metrics.jsonl``): a stopped run then ends sooner, as a run started
with the new ``rounds``, and no written round is ever deleted. ``checkpoint_every`` and ``eval.target_accuracy``
may change: they decide only when checkpoints are written and how the summary reads the accuracy.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fedgc.scenario.errors import ScenarioError
from fedgc.scenario.model import Scenario, validate

RESUMABLE = ("rounds", "checkpoint_every", "eval.target_accuracy")


def flat_fields(tree: dict[str, object], prefix: str = "") -> dict[str, object]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; lists and scalars are leaves."""
    out: dict[str, object] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_fields(value, name + "."))
        else:
            out[name] = value
    return out


def fingerprint(fields: dict[str, object]) -> str:
    fixed = {k: v for k, v in fields.items() if k not in RESUMABLE}
    return hashlib.sha256(json.dumps(fixed, sort_keys=True, default=str).encode()).hexdigest()


def scenario_record(scenario: Scenario) -> dict[str, Any]:
    """What a checkpoint stores about its scenario (plain data)."""
    fields = flat_fields(scenario.model_dump(mode="json"))
    return {"fingerprint": fingerprint(fields), "fields": fields, "rounds": scenario.rounds}


def in_todays_form(fields: dict[str, object]) -> dict[str, object] | None:
    """A checkpoint's fields read with today's schema (a checkpoint written before the network's tagged
    sections lists ``network.trace_down``, today's ``network.link.down``); None when they do not validate."""
    tree: dict[str, Any] = {}
    for dotted, value in fields.items():
        *sections, key = dotted.split(".")
        node = tree
        for section in sections:
            node = node.setdefault(section, {})
            if not isinstance(node, dict):
                return None
        node[key] = value
    try:
        return flat_fields(validate(tree, imports=False).model_dump(mode="json"))  # reading runs no plugin
    except ScenarioError:
        return None


def refusal(record: dict[str, Any], scenario: Scenario, checkpoint_round: int,
            last_round: int | None = None) -> str | None:
    """Why ``scenario`` cannot resume from a checkpoint written with ``record``, or None when it can.
    ``last_round``: the last round the run folder's ``metrics.jsonl`` holds (None: unknown)."""
    now = scenario_record(scenario)
    fields = record.get("fields")
    saved: dict[str, object] = fields if isinstance(fields, dict) else {}
    if now["fingerprint"] != record.get("fingerprint") and now["fingerprint"] != fingerprint(
            in_todays_form(saved) or {}):
        saved = in_todays_form(saved) or saved
        changed = sorted(k for k in set(saved) | set(now["fields"])
                         if k not in RESUMABLE and saved.get(k, "<absent>") != now["fields"].get(k, "<absent>"))
        names = ", ".join(changed) if changed else "unknown fields"
        return (f"scenario.yaml differs from the scenario of the checkpoint in {names}; a resume may only "
                f"change {', '.join(RESUMABLE)} (start a new run to change anything else)")
    saved_rounds = record.get("rounds")
    if not isinstance(saved_rounds, int):
        return "rounds: the checkpoint does not say how many rounds its run had"
    floor = max(checkpoint_round, last_round) if last_round is not None else saved_rounds
    if scenario.rounds < min(saved_rounds, floor):
        return (f"rounds: lowered from {saved_rounds} to {scenario.rounds}; a resume may raise rounds (extending "
                f"the run) or lower them only down to the last round it wrote (the checkpoint is at round "
                f"{checkpoint_round}, metrics.jsonl " + (f"at round {last_round})" if last_round is not None
                                                         else "unreadable)"))
    return None
