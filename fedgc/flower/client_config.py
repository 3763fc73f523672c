"""The client config a training message carries (``keys.CLIENT_CONFIG``, docs/client-protocol.md):
the training and compression settings, so a client in any language needs only the message.

The compression options travel generically and compactly: the options the named compressor's client
reads (``client_option_names``: found by building it, never listed by hand) go as ``c.<field>``, so a
new option travels without a change here; the density schedule stays on the server (the round's
density is ``config.density``). An option set to None is left out (absent: unset).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from flwr.app import ConfigRecord

from fedgc.compress.config import CompressionConfig
from fedgc.compress.registry import COMPRESSORS
from fedgc.flower import keys
from fedgc.scenario import Scenario

# Compression options the server alone reads: the round's density arrives as config.density.
SERVER_ONLY = frozenset({"name", "density", "warmup_rounds", "warmup_for"})
# Options every compressor's client reads (how compress_update encodes the payloads).
ALWAYS = ("dense_small_tensors", "value_dtype")


class _Reads:
    """A CompressionConfig that records which options are read of it."""

    def __init__(self, config: CompressionConfig) -> None:
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._config, name)


@functools.cache
def client_option_names(compressor: str) -> tuple[str, ...]:
    """The options ``compressor``'s client reads, in ``CompressionConfig``'s field order: what its
    ``from_config`` and ``make_memory`` read, and ``ALWAYS``. Found by building it, so an option a
    compressor starts reading travels without a change here."""
    cls = COMPRESSORS[compressor]
    probe = _Reads(CompressionConfig(name=compressor))
    cls.from_config(probe)
    cls.make_memory(probe)
    wanted = (probe.read | set(ALWAYS)) - SERVER_ONLY
    return tuple(name for name in CompressionConfig.model_fields if name in wanted)


class ClientConfigError(ValueError):
    """A training message without a usable client config."""


@dataclass(frozen=True)
class ClientSettings:
    """What a client trains and compresses with, read from the message alone."""

    model: str
    model_options: dict[str, Any]
    input_shape: tuple[int, ...]
    num_classes: int
    seed: int
    local_steps: int | None
    epochs: float | None
    batch_size: int
    lr: float
    momentum: float
    weight_decay: float
    compression: CompressionConfig


def client_options(compression: CompressionConfig) -> dict[str, Any]:
    """The compression options ``compression.name``'s client reads, by field name (None left out)."""
    dumped = compression.model_dump(mode="python")
    return {name: dumped[name] for name in client_option_names(compression.name) if dumped[name] is not None}


def client_config_record(scenario: Scenario, input_shape: tuple[int, ...], num_classes: int) -> ConfigRecord:
    """The client-config record of every training message of ``scenario``'s run, whose data has
    examples of ``input_shape`` and ``num_classes`` classes."""
    c = scenario.client
    record: dict[str, Any] = {keys.CC_VERSION: keys.CLIENT_CONFIG_VERSION, keys.CC_MODEL: scenario.model.name}
    if scenario.model.options:
        record[keys.CC_MODEL_OPTIONS] = json.dumps(scenario.model.options, sort_keys=True)
    record[keys.CC_INPUT_SHAPE] = [int(d) for d in input_shape]
    record[keys.CC_NUM_CLASSES] = int(num_classes)
    record[keys.CC_SEED] = int(scenario.seed)
    if c.local_steps is not None:
        record[keys.CC_LOCAL_STEPS] = int(c.local_steps)
    else:
        record[keys.CC_EPOCHS] = float(c.epochs)
    record.update({keys.CC_BATCH_SIZE: int(c.batch_size), keys.CC_LR: float(c.lr), keys.CC_MOMENTUM: float(c.momentum),
                   keys.CC_WEIGHT_DECAY: float(c.weight_decay), keys.CC_COMPRESSOR: scenario.compression.name})
    for name, value in client_options(scenario.compression).items():
        record[keys.CC_COMPRESSION_PREFIX + name] = value
    return ConfigRecord(record)


def _get(record: ConfigRecord, key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in record:
        raise ClientConfigError(f"client-config has no {key!r}")
    value = record[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))):
        raise ClientConfigError(f"client-config {key!r} is {type(value).__name__}, not {kind}")
    return value


def read_client_config(record: ConfigRecord | None) -> ClientSettings:
    """The settings in a message's client-config record; ClientConfigError if absent, of another
    version, or malformed (an unknown ``c.`` option included: the client would not honour it)."""
    if record is None:
        raise ClientConfigError(f"the training message has no {keys.CLIENT_CONFIG!r} record")
    version = _get(record, keys.CC_VERSION, int)
    if version != keys.CLIENT_CONFIG_VERSION:
        raise ClientConfigError(f"client-config version {version}; this client speaks {keys.CLIENT_CONFIG_VERSION}")
    options = {k[len(keys.CC_COMPRESSION_PREFIX):]: v for k, v in record.items()
               if k.startswith(keys.CC_COMPRESSION_PREFIX)}
    name = _get(record, keys.CC_COMPRESSOR, str)
    if name not in COMPRESSORS:
        raise ClientConfigError(f"client-config names an unknown compressor {name!r}")
    known = client_option_names(name)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ClientConfigError(f"client-config has options {name} does not read: {unknown}")
    options.update({option: None for option in known if option not in options})  # absent: unset
    try:
        compression = CompressionConfig(name=name, **options)
    except ValueError as err:
        raise ClientConfigError(f"client-config compression options: {err}") from None
    steps = _get(record, keys.CC_LOCAL_STEPS, int) if keys.CC_LOCAL_STEPS in record else None
    epochs = float(_get(record, keys.CC_EPOCHS, (int, float))) if keys.CC_EPOCHS in record else None
    if (steps is None) == (epochs is None):
        raise ClientConfigError("client-config needs exactly one of 'local-steps' and 'epochs'")
    model_options = json.loads(_get(record, keys.CC_MODEL_OPTIONS, str)) if keys.CC_MODEL_OPTIONS in record else {}
    input_shape = _get(record, keys.CC_INPUT_SHAPE, list)
    if not input_shape or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in input_shape):
        raise ClientConfigError(f"client-config {keys.CC_INPUT_SHAPE!r} is {input_shape!r}, not a list of positive ints")
    num_classes = _get(record, keys.CC_NUM_CLASSES, int)
    if num_classes < 1:
        raise ClientConfigError(f"client-config {keys.CC_NUM_CLASSES!r} is {num_classes}, not a positive int")
    return ClientSettings(model=_get(record, keys.CC_MODEL, str), model_options=model_options,
                          input_shape=tuple(input_shape), num_classes=num_classes,
                          seed=_get(record, keys.CC_SEED, int), local_steps=steps, epochs=epochs,
                          batch_size=_get(record, keys.CC_BATCH_SIZE, int),
                          lr=float(_get(record, keys.CC_LR, (int, float))),
                          momentum=float(_get(record, keys.CC_MOMENTUM, (int, float))),
                          weight_decay=float(_get(record, keys.CC_WEIGHT_DECAY, (int, float))),
                          compression=compression)
