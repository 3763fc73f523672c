"""The ``compression`` section of a scenario, and the reading of a compressor's options that the
``downlink`` section (``fedgc.compress.downlink``) shares with it.

The section is flat, as users write it (``compression: {name: dgc, density: 0.01, momentum: 0.9}``).
Its own keys (``name``, ``density``, ``warmup_rounds``, ``warmup_for``) are the server's; every other
key is an option of the named compressor, validated by that compressor's ``Options`` model
(``fedgc/compress/dgc.py``'s ``DGCOptions``, …, each a subclass of ``CompressorOptions``, which holds
the keys every compressor reads: ``error_feedback``, ``value_dtype``, ``dense_small_tensors``). Each
option is declared once, by the compressor that reads it; a new option is a field of its ``Options``.

A key that belongs to another compressor is an error (one line naming both compressors and the named
one's keys): it would be ignored. Options for another compressor, kept for a sweep over ``name``, go
under that compressor's name and apply only when it is named, a flat key winning over them::

    compression: {name: topk, density: 0.01, dgc: {momentum: 0.95}}

``config.options`` is the named compressor's ``Options`` instance (what ``from_config`` and
``make_memory`` receive); ``config.others`` the sections kept for other compressors. The resolved form
(``model_dump``) is flat again: the section's keys, every option of the named compressor, and the
sections of the others as written.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from fedgc.compress.base import V3_VALUE_DTYPES, CompressorOptions
from fedgc.compress.registry import COMPRESSORS, SERVER_KEYS, uses_density

COMMON_OPTIONS: tuple[str, ...] = tuple(CompressorOptions.model_fields)
# The compressors' options that the resolved ``compression`` section listed for every compressor before
# options were per compressor: a section holding all of them is a ``scenario.yaml`` (or checkpoint) of
# that time. Its other compressors' keys are refused in one line that names them all and says to delete
# them (at their defaults, they never changed a run), not one by one and not silently dropped.
LEGACY_COMPRESSION_KEYS = frozenset({
    "threshold", "momentum", "nesterov", "momentum_correction", "momentum_masking", "clip_norm",
    "momentum_dtype", "sample_ratio", "signum_momentum", "qsgd_levels", "qsgd_bucket_size", "powersgd_rank"})


SECTION_KEYS = ("name", "density", "warmup_rounds", "warmup_for")  # registry.SERVER_KEYS, in order


def own_options(name: str) -> tuple[str, ...]:
    """The options compressor ``name`` adds to ``CompressorOptions``."""
    return tuple(key for key in COMPRESSORS[name].Options.model_fields if key not in COMMON_OPTIONS)


def _one_error(err: ValidationError, where: str, name: str, flat: Collection[str]) -> ValueError:
    first = err.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    at = f"{where}.{field}" if not first["loc"] or first["loc"][0] in flat else f"{where}.{name}.{field}"
    return ValueError(f"{at}: {first['msg'].removeprefix('Value error, ')}")


def _options(name: str, values: dict[str, Any], where: str, flat: Collection[str]) -> CompressorOptions:
    try:
        return COMPRESSORS[name].Options.model_validate(values, strict=True)
    except ValidationError as err:
        raise _one_error(err, where, name, flat) from None


def _unknown(where: str, key: str, keys: list[str]) -> ValueError:
    guess = difflib.get_close_matches(str(key), keys, n=1, cutoff=0.6)
    hint = f"did you mean `{guess[0]}`?" if guess else f"the keys here: {', '.join(keys)}"
    return ValueError(f"{where}.{key}: unknown key ({hint})")


def read_section(data: Any, *, where: str, section_keys: Collection[str], default_name: str,
                 allowed: Collection[str], fixed: dict[str, Any] | None = None,
                 legacy: frozenset[str] = frozenset()) -> Any:
    """A section as written (flat, with other compressors' options under their names) → the values of
    its model: the section's own keys, ``options`` (the named compressor's) and ``others``.

    ``allowed``: the compressors this section may name; ``fixed``: common options the section sets
    itself (they are not keys of it); ``legacy``: option keys whose joint presence marks an old
    resolved section (see ``LEGACY_COMPRESSION_KEYS``)."""
    if not isinstance(data, dict):
        return data  # a model instance, or a type error pydantic reports
    fixed = fixed or {}
    name = data.get("name", default_name)
    if not isinstance(name, str) or name not in allowed or name not in COMPRESSORS:
        return {key: value for key, value in data.items() if key in section_keys}  # the name's error alone
    keys = [key for key in COMPRESSORS[name].Options.model_fields if key not in fixed]
    listed = [*section_keys, *keys]
    old_form = bool(legacy) and legacy <= data.keys()
    section: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    kept: dict[str, dict[str, Any]] = {}
    foreign: list[str] = []
    for key, value in data.items():
        if key in section_keys:
            section[key] = value
        elif isinstance(value, dict) and key in allowed and key in COMPRESSORS:
            kept[key] = value
        elif key in keys:
            flat[key] = value
        elif key in fixed:
            raise ValueError(f"{where}.{key}: not a key here ({where} always has {key}: {str(fixed[key]).lower()})")
        else:
            owners = [other for other in COMPRESSORS if key in own_options(other)]
            if not owners:
                raise _unknown(where, key, listed)
            if old_form and all(COMPRESSORS[o].Options.model_fields[key].default == value for o in owners):
                foreign.append(key)  # refused below, all together: the file is of an older fedgc
                continue
            nest = [o for o in owners if o in allowed]
            hint = (f"; to keep it for name: {nest[0]}, write it under {where}.{nest[0]} "
                    f"({nest[0]}: {{{key}: ...}})") if nest else ""
            raise ValueError(f"{where}.{key}: an option of {', '.join(owners)}, not of {name} "
                             f"({name}'s keys: {', '.join(listed)}){hint}")
    if foreign:
        raise ValueError(f"{', '.join(foreign)}: other compressors' options at their defaults, as an "
                         f"older fedgc wrote every compressor's options into {where}; {name} never read them: "
                         f"delete these keys (the run is the same without them)")
    others: dict[str, CompressorOptions] = {}
    for other, values in kept.items():
        valid = [key for key in COMPRESSORS[other].Options.model_fields if key not in fixed]
        for key in values:
            if key not in valid:
                raise ValueError(f"{where}.{other}.{key}: not an option of {other} ({other}'s keys: {', '.join(valid)})")
        if other != name:
            others[other] = _options(other, {**values, **fixed}, where, ())
    options = _options(name, {**kept.get(name, {}), **flat, **fixed}, where, flat)
    if options.value_dtype in V3_VALUE_DTYPES and not COMPRESSORS[name].sparse_values:
        sparse = ", ".join(n for n in allowed if n in COMPRESSORS and COMPRESSORS[n].sparse_values)
        raise ValueError(f"{where}.value_dtype: {options.value_dtype} encodes sparse values, and {name} sends "
                         f"none (fp32 or fp16 here; {options.value_dtype} with {sparse})")
    return {**section, "options": options, "others": others}


def keep_options_for(section: dict[str, Any], new_name: Any, default_name: str) -> None:
    """Before ``section["name"]`` becomes ``new_name`` (``--set``/``--sweep compression.name=…`` or
    ``downlink.name``): the flat options of the compressor named so far that ``new_name`` does not read
    move under the old name, where they are kept for it (a flat key winning over a kept one). So a
    sweep over compressors on a DGC scenario keeps DGC's options for the DGC point, and a key written
    next to the wrong name in a file is still an error."""
    old = section.get("name", default_name)
    if not isinstance(old, str) or old not in COMPRESSORS or not isinstance(new_name, str) or new_name == old:
        return
    reads = COMPRESSORS[new_name].Options.model_fields if new_name in COMPRESSORS else {}
    moving = [key for key in own_options(old)
              if key in section and key not in reads and not isinstance(section[key], dict)]
    kept = section.get(old, {}) if old not in moving else {}
    if not moving or not isinstance(kept, dict):
        return
    section[old] = {**kept, **{key: section.pop(key) for key in moving}}


def dump_section(model: BaseModel, mode: str, first: tuple[str, ...], hidden: Collection[str] = ()) -> dict[str, Any]:
    """The resolved flat form of a section model (``first`` keys, then the common options, the other
    section keys, the named compressor's own options and the sections kept for others)."""
    options = model.options.model_dump(mode=mode)  # type: ignore[attr-defined]
    rest = [key for key in type(model).model_fields if key not in (*first, "options", "others")]
    out = {key: getattr(model, key) for key in first}
    out.update({key: options[key] for key in COMMON_OPTIONS if key not in hidden})
    out.update({key: list(v) if isinstance(v := getattr(model, key), list) else v for key in rest})
    out.update({key: value for key, value in options.items() if key not in COMMON_OPTIONS})
    for other, kept in model.others.items():  # type: ignore[attr-defined]
        out[other] = kept.model_dump(mode=mode, exclude_unset=True, exclude=set(hidden))
    return out


class CompressionConfig(BaseModel):
    """The ``compression`` section (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field("dgc", description="compressor name (see fedgc.compress.registry)")
    density: float = Field(0.01, gt=0.0, le=1.0, description="fraction of entries sent after warm-up")
    warmup_rounds: int = Field(0, ge=0, description="rounds of exponentially rising sparsity before `density`, "
                                                     "for the compressors in `warmup_for`")
    warmup_for: list[str] = Field(["dgc"], description="compressors the warm-up applies to: dgc by default; "
                                                        "topk, randomk and stc only when listed here")
    options: CompressorOptions = Field(default_factory=lambda: COMPRESSORS["dgc"].Options(),
                                       description="the named compressor's options (its Options model)")
    others: dict[str, CompressorOptions] = Field(default_factory=dict,
                                                 description="options kept for other compressors, by name")

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        return read_section(data, where="compression", section_keys=SECTION_KEYS, default_name="dgc",
                            allowed=COMPRESSORS, legacy=LEGACY_COMPRESSION_KEYS)

    @field_validator("name")
    @classmethod
    def _known_compressor(cls, name: str) -> str:
        if name not in COMPRESSORS:
            raise ValueError(f"unknown compressor {name!r}; known: {', '.join(sorted(COMPRESSORS))}")
        return name

    @field_validator("warmup_for")
    @classmethod
    def _warmable(cls, names: list[str]) -> list[str]:
        for name in names:
            if not uses_density(name):
                known = sorted(n for n in COMPRESSORS if uses_density(n))
                raise ValueError(f"{name!r} has no density to warm up; list only compressors that use "
                                 f"compression.density: {', '.join(known)}")
        return names

    @model_serializer(mode="plain")
    def _flat(self, info: Any) -> dict[str, Any]:
        return dump_section(self, info.mode, ("name", "density"))

    @property
    def error_feedback(self) -> bool:
        return self.options.error_feedback

    @property
    def value_dtype(self) -> str:
        return self.options.value_dtype

    @property
    def dense_small_tensors(self) -> bool:
        return self.options.dense_small_tensors


assert set(CompressionConfig.model_fields) - {"options", "others"} == SERVER_KEYS == set(SECTION_KEYS)
