"""Model registry (no Flower imports here).

``MODELS`` maps a scenario's ``model.name`` to a model class ``cls(input_shape, num_classes, **options)``;
each class's ``Options`` (pydantic, unknown keys are errors) validates its ``model.options``.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any, cast

import torch
from pydantic import BaseModel, ValidationError
from torch import nn

from fedgc.models.cnn import McMahanCNN, SmallCNN
from fedgc.models.lstm import CharLSTM
from fedgc.models.mlp import MLP, LogisticRegression, McMahan2NN
from fedgc.models.resnet import ResNet20

MODELS: dict[str, type[nn.Module]] = {
    "mlp": MLP,
    "logreg": LogisticRegression,
    "mnist_2nn": McMahan2NN,
    "small_cnn": SmallCNN,
    "mnist_cnn": McMahanCNN,
    "resnet20": ResNet20,
    "char_lstm": CharLSTM,
}


def _unknown_key(options: type[BaseModel], values: Any) -> str | None:
    """``KEY: unknown key (did you mean `hidden`?)`` for the first key of ``values`` that the options model
    declares neither as a field nor as an alias (a plugin's plain pydantic model would ignore it: a typo
    would run with the default); the hint is the closest key, as the scenario's errors give it
    (``fedgc.scenario.errors.did_you_mean``; this leaf imports nothing of fedgc)."""
    if not isinstance(values, Mapping):
        return None
    keys = [k for name, f in options.model_fields.items()
            for k in (name, f.alias, f.validation_alias) if isinstance(k, str)]
    for key in values:
        if key not in keys:
            text = str(key)[:80]
            close = difflib.get_close_matches(text, keys, n=1, cutoff=0.6)
            return f"{text}: unknown key" + (f" (did you mean `{close[0]}`?)" if close else "")
    return None


def _options_of(name: str) -> type[BaseModel]:
    """``MODELS[name].Options``: every entry has one (a class here, or the builder
    ``fedgc.plugins.registry`` registers), though ``nn.Module``, the entries' declared type, does not."""
    return cast("type[BaseModel]", cast(Any, MODELS[name]).Options)


def validate_model_options(name: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options for model ``name``, defaults filled in; ``ValueError`` in one line naming the key."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    problem = _unknown_key(_options_of(name), options or {})  # whatever the Options' own extra= says
    if problem is not None:
        raise ValueError(f"options.{problem} (model {name})")
    try:
        return _options_of(name)(**dict(options or {})).model_dump()
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "options"
        msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise ValueError(f"options.{key}: {msg} (model {name})") from None


DEFAULT_MAX_PARAMETERS = 2**28  # 268M parameters, 1 GiB of fp32 weights; FEDGC_MAX_PARAMETERS overrides


def max_parameters() -> int:
    """The largest model fedgc builds: ``$FEDGC_MAX_PARAMETERS`` when set, else 2^28."""
    text = os.environ.get("FEDGC_MAX_PARAMETERS", "")
    return int(text) if text.isdigit() else DEFAULT_MAX_PARAMETERS


def estimated_parameters(name: str, input_shape: tuple[int, ...], num_classes: int,
                         options: Mapping[str, Any] | None = None) -> int:
    """The parameter count of the named model, from a build on PyTorch's ``meta`` device (shapes only,
    nothing allocated, no random draw)."""
    return _meta_build(name, tuple(input_shape), num_classes, options)[0]


def tensor_specs(name: str, input_shape: tuple[int, ...], num_classes: int,
                 options: Mapping[str, Any] | None = None) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{tensor: (numpy dtype name, shape)}`` of the named model's ``state_dict``, in order, from a
    build on the ``meta`` device (nothing allocated)."""
    return {k: (dtype, shape) for k, dtype, shape in _meta_build(name, tuple(input_shape), num_classes, options)[1]}


def _meta_build(name: str, input_shape: tuple[int, ...], num_classes: int, options: Mapping[str, Any] | None
                ) -> tuple[int, tuple[tuple[str, str, tuple[int, ...]], ...]]:
    """(parameter count, state_dict specs) of a ``meta`` build. Every training message asks for them
    (a client checks the model it is sent), so they are kept per model class, input and options."""
    kwargs = validate_model_options(name, options)
    key = (MODELS[name], tuple(input_shape), num_classes, json.dumps(kwargs, sort_keys=True, default=repr))
    if key not in _META_BUILDS:
        with torch.random.fork_rng(devices=[]), torch.device("meta"), _NoRandomInit():
            model = MODELS[name](tuple(input_shape), num_classes, **kwargs)
        specs = tuple((k, str(v.dtype).removeprefix("torch."), tuple(v.shape)) for k, v in model.state_dict().items())
        if len(_META_BUILDS) >= 64:
            _META_BUILDS.clear()
        _META_BUILDS[key] = (parameter_count(model), specs)
    return _META_BUILDS[key]


_META_BUILDS: dict[tuple[type[nn.Module], tuple[int, ...], int, str],
                   tuple[int, tuple[tuple[str, str, tuple[int, ...]], ...]]] = {}

# In-place random fills, by name: on the meta device there is nothing to fill, and PyTorch's meta
# normal_ imports torch._dynamo (4 s) the first time (an Embedding's init, ResNet's kaiming_normal_).
_RANDOM_FILLS = frozenset({"normal_", "uniform_", "exponential_", "geometric_", "log_normal_", "cauchy_", "random_",
                           "trunc_normal_", "kaiming_normal_", "kaiming_uniform_", "xavier_normal_",
                           "xavier_uniform_", "orthogonal_"})


class _NoRandomInit(torch.overrides.TorchFunctionMode):
    """Within it (this thread), the random fills above return their tensor untouched: shapes only."""

    def __torch_function__(self, func: Callable[..., Any], types: Collection[type], args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in _RANDOM_FILLS:
            return args[0] if args else kwargs.get("tensor")
        return func(*args, **kwargs)


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, seed: int,
                options: Mapping[str, Any] | None = None) -> nn.Module:
    """Build the named model with weights drawn from ``seed`` (same seed, same initial model). A model
    of more than :func:`max_parameters` parameters is refused (``ValueError``, one line) before any
    weight is allocated."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    kwargs = validate_model_options(name, options)
    count, limit = estimated_parameters(name, input_shape, num_classes, options), max_parameters()
    if count > limit:
        raise ValueError(f"model {name} with input {tuple(input_shape)} and {num_classes} classes has {count:,} "
                         f"parameters, more than the {limit:,} fedgc builds (set FEDGC_MAX_PARAMETERS to allow it)")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MODELS[name](tuple(input_shape), num_classes, **kwargs)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = ["MODELS", "build_model", "estimated_parameters", "max_parameters", "parameter_count", "tensor_specs",
           "validate_model_options"]
