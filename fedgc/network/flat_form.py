"""The flat form of a ``network`` section, as scenarios before the tagged sections wrote it:
``link: trace`` with ``trace_down: [...]`` beside it instead of ``link: {name: trace, down: [...]}``.

:func:`fold` turns it into the tagged form, so every existing scenario (and every ``scenario.yaml`` in
an existing run folder, which lists every key with its default) keeps working. A flat key of a kind
the section does not have is dropped when it holds its default (a resolved file lists them all) and
is an error otherwise, naming what to write instead.
"""

from __future__ import annotations

from typing import Any

from fedgc.network.sections import SECTIONS

# flat key: (section, kinds that read it, key inside the section)
FLAT_KEYS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "bandwidth_file": ("link", ("constant", "gilbert_elliott"), "bandwidth_file"),
    "ge_mean_good_s": ("link", ("gilbert_elliott",), "mean_good_s"),
    "ge_mean_bad_s": ("link", ("gilbert_elliott",), "mean_bad_s"),
    "ge_bad_factor": ("link", ("gilbert_elliott",), "bad_factor"),
    "ge_good_loss": ("link", ("gilbert_elliott",), "good_loss"),
    "ge_bad_loss": ("link", ("gilbert_elliott",), "bad_loss"),
    "trace_down": ("link", ("trace",), "down"),
    "trace_up": ("link", ("trace",), "up"),
    "trace_format": ("link", ("trace",), "format"),
    "trace_unit": ("link", ("trace",), "unit"),
    "trace_random_start": ("link", ("trace",), "random_start"),
    "device_samples_per_s": ("device", ("constant",), "samples_per_s"),
    "device_tier": ("device", ("tier",), "tier"),
    "device_file": ("device", ("file",), "file"),
    "device_file_scale": ("device", ("file",), "scale"),
    "mean_on_s": ("availability", ("exponential",), "mean_on_s"),
    "mean_off_s": ("availability", ("exponential",), "mean_off_s"),
    "availability_file": ("availability", ("trace",), "file"),
    "availability_period_s": ("availability", ("trace",), "period_s"),
    **{key: ("protocol", ("flower",), key) for key in
       ("pull_interval_s", "requests_down", "requests_up", "reply_poll_s", "pull_backoff_s", "pull_backoff_cap_s")},
}


# Defaults a key held before it was changed: a resolved file written then lists them.
FORMER_DEFAULTS: dict[str, tuple[Any, ...]] = {"pull_backoff_s": (1.0,), "requests_down": (3,), "requests_up": (2,)}


def _unset(key: str, value: Any, section: str, kinds: tuple[str, ...], field: str) -> bool:
    """True when ``value`` says nothing: empty, the key's default, or a default it once had."""
    info = SECTIONS[section][0][kinds[0]].model_fields[field]
    default = None if info.is_required() else info.default
    return value is None or value == [] or value == default or value in FORMER_DEFAULTS.get(key, ())


def _device_kind(flat: dict[str, Any]) -> str:
    """The flat form names no device kind: a tier or a file when one is given, else a constant speed."""
    tier, file = flat.get("device_tier"), flat.get("device_file")
    if tier is not None and file is not None:
        raise ValueError("network.device_tier: set either device_tier or device_file, not both")
    return "tier" if tier is not None else "file" if file is not None else "constant"


def fold(network: dict[str, Any]) -> dict[str, Any]:
    """The tagged form of a ``network`` mapping written in the flat form, the tagged form or a mix
    (a flat ``--set`` over a tagged file). A new mapping; values the schema will reject are left for it."""
    out = dict(network)
    flat = {key: out.pop(key) for key in list(out) if key in FLAT_KEYS}
    for section, (_kinds, default_kind) in SECTIONS.items():
        given = out.get(section)
        if isinstance(given, str):
            out[section] = {"name": given}
        elif isinstance(given, dict):
            out[section] = dict(given)
        elif given is None and section == "device":
            out[section] = {"name": _device_kind(flat)}
        elif given is None:
            out[section] = {"name": default_kind}
    for key, value in flat.items():
        section, kinds, field = FLAT_KEYS[key]
        target = out[section]
        if not isinstance(target, dict):
            continue  # not a mapping: the schema names the error
        kind = target.get("name")
        if kind not in kinds:
            if _unset(key, value, section, kinds, field):
                continue  # an unset key, as a resolved file lists it
            wanted = " or ".join(kinds)
            raise ValueError(f"network.{key}: only applies when {section} is {wanted} "
                             f"(write network.{section}: {{name: {kinds[0]}, {field}: ...}})")
        if field in target and target[field] != value:
            raise ValueError(f"network.{key}: also given as network.{section}.{field}; keep one "
                             f"(network.{section}.{field})")
        target[field] = value
    return out
