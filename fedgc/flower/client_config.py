"""The client config a training message carries (``keys.CLIENT_CONFIG``, docs/client-protocol.md):
the training and compression settings, so a client in any language needs only the message.

The compression options travel generically and compactly: the options the named compressor's client
reads (``client_option_names``: the fields of its ``Options`` model, less ``error_feedback`` for a
compressor that ignores it) go as ``c.<field>``, so a new option travels without a change here; the
density schedule stays on the server (the round's density is ``config.density``). An option set to
None is left out (absent: unset).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any

from flwr.app import ConfigRecord

from fedgc.compress.config import CompressionConfig
from fedgc.compress.registry import COMPRESSORS, SERVER_KEYS
from fedgc.flower import keys
from fedgc.flower.client_checks import ClientRefusal, NodeLimits, is_int, number
from fedgc.models import MODELS, estimated_parameters, validate_model_options
from fedgc.plugins.import_paths import PluginError, is_import_path
from fedgc.plugins.registry import resolve
from fedgc.scenario.model import Scenario

# Compression options the server alone reads: the round's density arrives as config.density.
SERVER_ONLY = SERVER_KEYS
# Options every compressor's client reads (how compress_update encodes the payloads).
ALWAYS = ("dense_small_tensors", "value_dtype")


@functools.cache
def client_option_names(compressor: str) -> tuple[str, ...]:
    """The options ``compressor``'s client reads, in its ``Options`` model's field order (the common
    ones first): every field, but ``error_feedback`` where the compressor does not read it (DGC)."""
    cls = COMPRESSORS[compressor]
    return tuple(name for name in cls.Options.model_fields if name != "error_feedback" or cls.reads_error_feedback)


class ClientConfigError(ClientRefusal):
    """A training message without a usable client config (reason ``bad-client-config``)."""

    def __init__(self, detail: str, reason: str = "bad-client-config") -> None:
        super().__init__(reason, detail)


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
    report_norms: bool = False  # reply with the update's norms before and after local clipping


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
    if c.report_norms:  # absent unless asked: the messages of a run without it stay byte for byte the same
        record[keys.CC_REPORT_NORMS] = True
    for name, value in client_options(scenario.compression).items():
        record[keys.CC_COMPRESSION_PREFIX + name] = value
    return ConfigRecord(record)


MAX_MODEL_OPTIONS_CHARS = 65_536
MAX_INPUT_DIMS, MAX_INPUT_SIDE, MAX_INPUT_ELEMENTS = 4, 65_536, 2**24
MAX_CLASSES = 2**20


def _get(record: ConfigRecord, key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in record:
        raise ClientConfigError(f"client-config has no {key!r}")
    value = record[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))):
        raise ClientConfigError(f"client-config {key!r} is {type(value).__name__}, not {kind}")
    return value


def _int_in(record: ConfigRecord, key: str, low: int, high: int) -> int:
    value = _get(record, key, int)
    if not low <= value <= high:
        raise ClientConfigError(f"client-config {key!r} is {value}, not in {low}…{high}")
    return value


def _model_options(record: ConfigRecord, model: str) -> dict[str, Any]:
    """``model-options``: a JSON object of at most 64 KiB whose keys the model's ``Options`` declare."""
    if keys.CC_MODEL_OPTIONS not in record:
        return {}
    text = _get(record, keys.CC_MODEL_OPTIONS, str)
    if len(text) > MAX_MODEL_OPTIONS_CHARS:
        raise ClientConfigError(f"client-config {keys.CC_MODEL_OPTIONS!r} is {len(text)} characters, more than "
                                f"{MAX_MODEL_OPTIONS_CHARS}")
    try:
        options = json.loads(text)
    except (ValueError, RecursionError):
        raise ClientConfigError(f"client-config {keys.CC_MODEL_OPTIONS!r} is not a JSON object") from None
    if not isinstance(options, dict):
        raise ClientConfigError(f"client-config {keys.CC_MODEL_OPTIONS!r} is not a JSON object")
    try:
        return validate_model_options(model, options)
    except (ValueError, TypeError, RecursionError) as err:
        raise ClientConfigError(f"client-config {keys.CC_MODEL_OPTIONS!r}: {str(err)[:200]}") from None


def node_known(kind: str, name: str, table: dict) -> None:
    """An import path in a message is resolved only where this node's operator allows its module
    (``fedgc.plugins.registry.node_policy``, node config ``plugins=...``); anything else stays unknown and is
    refused below — a message never makes a node import code."""
    if is_import_path(name) and name not in table:
        try:
            resolve(kind, name)
        except PluginError:
            pass


def read_client_config(record: ConfigRecord | None, limits: NodeLimits | None = None) -> ClientSettings:
    """The settings in a message's client-config record; ClientConfigError if absent, of another
    version, malformed (an unknown ``c.`` option included: the client would not honour it), or out of
    range (docs/client-protocol.md, "What a client refuses"; ``limits``: the node's own)."""
    limits = limits or NodeLimits()
    if not isinstance(record, ConfigRecord):
        raise ClientConfigError(f"the training message has no {keys.CLIENT_CONFIG!r} record")
    version = _get(record, keys.CC_VERSION, int)
    if version != keys.CLIENT_CONFIG_VERSION:
        raise ClientConfigError(f"client-config version {version}; this client speaks {keys.CLIENT_CONFIG_VERSION}")
    options = {k[len(keys.CC_COMPRESSION_PREFIX):]: v for k, v in record.items()
               if k.startswith(keys.CC_COMPRESSION_PREFIX)}
    name = _get(record, keys.CC_COMPRESSOR, str)
    node_known("compressor", name, COMPRESSORS)
    if name not in COMPRESSORS:
        raise ClientConfigError(f"client-config names an unknown compressor {name[:60]!r}")
    known = client_option_names(name)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ClientConfigError(f"client-config has options {name} does not read: {unknown[:5]}")
    options.update({option: None for option in known if option not in options})  # absent: unset
    try:
        compression = CompressionConfig.model_validate({"name": name, **options}, strict=True)
    except ValueError as err:
        raise ClientConfigError(f"client-config compression options: {str(err).splitlines()[0][:200]}") from None
    steps = _int_in(record, keys.CC_LOCAL_STEPS, 1, limits.max_local_steps) if keys.CC_LOCAL_STEPS in record else None
    epochs = (number(record, keys.CC_EPOCHS, 0.0, limits.max_epochs, low_open=True)
              if keys.CC_EPOCHS in record else None)
    if (steps is None) == (epochs is None):
        raise ClientConfigError("client-config needs exactly one of 'local-steps' and 'epochs'")
    model = _get(record, keys.CC_MODEL, str)
    node_known("model", model, MODELS)
    if model not in MODELS:
        raise ClientConfigError(f"client-config names a model this node does not have: {model[:60]!r}",
                                reason="unknown-model")
    model_options = _model_options(record, model)
    input_shape = _get(record, keys.CC_INPUT_SHAPE, list)
    if not 1 <= len(input_shape) <= MAX_INPUT_DIMS or not all(is_int(d) and 1 <= d <= MAX_INPUT_SIDE for d in input_shape) \
            or math.prod(input_shape) > MAX_INPUT_ELEMENTS:
        raise ClientConfigError(f"client-config {keys.CC_INPUT_SHAPE!r} is {input_shape!r:.60}, not 1 to "
                                f"{MAX_INPUT_DIMS} positive sides of at most {MAX_INPUT_ELEMENTS} elements in all")
    num_classes = _int_in(record, keys.CC_NUM_CLASSES, 1, MAX_CLASSES)
    settings = ClientSettings(
        model=model, model_options=model_options, input_shape=tuple(input_shape), num_classes=num_classes,
        seed=_int_in(record, keys.CC_SEED, 0, 2**32 - 1), local_steps=steps, epochs=epochs,
        batch_size=_int_in(record, keys.CC_BATCH_SIZE, 1, limits.max_batch_size),
        lr=number(record, keys.CC_LR, 0.0, 1e6, low_open=True),
        momentum=number(record, keys.CC_MOMENTUM, 0.0, 1.0, high_open=True),
        weight_decay=number(record, keys.CC_WEIGHT_DECAY, 0.0, 1e6),
        compression=compression,
        report_norms=_get(record, keys.CC_REPORT_NORMS, bool) if keys.CC_REPORT_NORMS in record else False)
    try:
        count = estimated_parameters(model, settings.input_shape, num_classes, model_options)
    except (ValueError, RuntimeError, TypeError) as err:  # a model that cannot take this input
        raise ClientConfigError(f"model {model} cannot be built for input {settings.input_shape}: "
                                f"{str(err).splitlines()[0][:120]}", reason="bad-model") from None
    if count > limits.max_parameters:
        raise ClientConfigError(f"model {model} for input {settings.input_shape} and {num_classes} classes has "
                                f"{count:,} parameters, more than this node's {limits.max_parameters:,}", reason="too-large")
    return settings
