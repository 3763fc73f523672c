"""A scenario given from Python is bounded like a scenario file, and what it would allocate is bounded
before anything is: each refusal is one ``ScenarioError`` line, in well under 0.1 s.

- a tree nested past ``MAX_TREE_DEPTH``, holding itself, of more than ``MAX_TREE_VALUES`` values, or with
  more string characters than a scenario file's bytes (``Scenario.from_dict``, ``build``, ``with_overrides``);
- synthetic data whose clients × samples × dimension (the seed's own device sizes) passes ``MAX_DATA_BYTES``;
- a built-in model with more parameters than ``max_parameters()`` (an MLP's ``hidden: [10**9]``)."""

from __future__ import annotations

import time
from functools import partial

import numpy as np
import pytest

import fedgc
from fedgc.data.config import MAX_DATA_BYTES, SyntheticConfig, synthetic_bytes
from fedgc.data.synthetic import generate_synthetic
from fedgc.scenario.model import MAX_NAME_CHARS, MAX_TREE_DEPTH, MAX_TREE_VALUES

BASE = {"name": "bounds", "rounds": 1}


def nested(depth: int) -> dict:
    root = node = {}
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


def self_containing() -> dict:
    loop: dict = {"hidden": [16]}
    loop["again"] = loop
    return loop


def refused(make, message: str) -> None:
    """``make()`` raises a one-line ``ScenarioError`` holding ``message``, in under 0.1 s."""
    start = time.perf_counter()
    with pytest.raises(fedgc.ScenarioError) as err:
        make()
    elapsed = time.perf_counter() - start
    assert message in str(err.value), str(err.value)
    assert "\n" not in str(err.value) and len(str(err.value)) < 400
    assert elapsed < 0.1, f"{elapsed:.3f} s"


# Each case builds its input first (that is the caller's time), then returns the call that is timed.
def deep_dict():
    return partial(fedgc.Scenario.from_dict, {**BASE, "model": {"name": "mlp", "options": nested(100_000)}})


def cyclic_section():
    return partial(fedgc.Scenario.build, **BASE, data=self_containing())


def many_values():
    return partial(fedgc.Scenario.from_dict, {**BASE, "strategy": {"aggregation_options": {"k": list(range(MAX_TREE_VALUES))}}})


def long_name():
    return partial(fedgc.Scenario.from_dict, {**BASE, "name": "n" * 10_000_000})


def huge_integer():
    return partial(fedgc.Scenario.from_dict, {**BASE, "rounds": 10**400})


def deep_override():
    return partial(fedgc.Scenario.from_dict(BASE).with_overrides, {"model.options": nested(100_000)})


def cyclic_override():
    return partial(fedgc.Scenario.from_dict(BASE).with_overrides, {"model.options": self_containing()})


def not_a_mapping():
    return partial(fedgc.Scenario.from_dict, ["name", "x"])


@pytest.mark.parametrize("prepare, message", [
    (deep_dict, f"nested more than {MAX_TREE_DEPTH} levels deep"),
    (cyclic_section, "data.again: contains itself"),
    (many_values, f"more than {MAX_TREE_VALUES:,} values"),
    (long_name, "name: the scenario's strings hold more than"),
    (huge_integer, "rounds: an integer of 1,329 bits is no scenario value"),
    (deep_override, f"nested more than {MAX_TREE_DEPTH} levels deep"),
    (cyclic_override, "contains itself"),
    (not_a_mapping, "scenario: expected a mapping of scenario keys, not list"),
])
def test_a_hostile_tree_is_one_line_and_fast(prepare, message):
    refused(prepare(), message)


def test_the_name_is_bounded_by_what_a_folder_name_holds():
    refused(lambda: fedgc.Scenario.from_dict({**BASE, "name": "n" * (MAX_NAME_CHARS + 1)}),
            f"name: String should have at most {MAX_NAME_CHARS} characters")
    assert fedgc.Scenario.from_dict({**BASE, "name": "n" * MAX_NAME_CHARS}).name == "n" * MAX_NAME_CHARS


@pytest.mark.parametrize("model, message", [
    ({"name": "mlp", "options": {"hidden": [10**9]}},
     "model.options: model mlp has 75,000,000,010 parameters for input (1, 8, 8) and 10 classes, more than the 268,435,456"),
    ({"name": "char_lstm", "options": {"hidden_size": 10**6}}, "model.options: model char_lstm has at least"),
])
def test_a_built_in_model_past_the_parameter_ceiling_is_refused_at_validation(model, message):
    refused(lambda: fedgc.Scenario.from_dict({**BASE, "model": model}), message)


def test_the_parameter_ceiling_follows_fedgc_max_parameters(monkeypatch):
    monkeypatch.setenv("FEDGC_MAX_PARAMETERS", str(10**12))
    assert fedgc.Scenario.from_dict({**BASE, "model": {"name": "mlp", "options": {"hidden": [10**9]}}})


def test_synthetic_data_past_the_ceiling_is_refused_before_anything_is_generated():
    data = {"dataset": "synthetic", "num_clients": 1000, "synthetic": {"dimension": 10_000}}
    refused(lambda: fedgc.Scenario.from_dict({**BASE, "data": data}),
            "data.synthetic: 1,000 clients of dimension 10,000 would allocate 19.0 GiB (seed 0's device sizes), more "
            "than the 2 GiB fedgc generates")
    assert fedgc.Scenario.from_dict({**BASE, "data": {**data, "synthetic": {"dimension": 60}}})


def test_the_synthetic_bound_is_what_generating_allocates():
    """``synthetic_bytes`` counts the very device sizes the generator draws: the splits it returns hold
    exactly its float32 features and int64 labels and device ids, plus the largest device's float64 draws."""
    config = SyntheticConfig(dimension=30, num_classes=5)
    for seed, clients in ((0, 7), (5, 40)):
        data = generate_synthetic(clients, np.random.default_rng(seed), dimension=30, num_classes=5)
        held = data.train.x.nbytes + data.test.x.nbytes + data.train.y.nbytes + data.test.y.nbytes + data.train_groups.nbytes
        largest = max(np.bincount(data.train_groups)) / 0.9  # a device's train part is 90 % of it
        assert synthetic_bytes(clients, config, seed) >= held
        assert synthetic_bytes(clients, config, seed) - held <= 24 * 30 * (largest + 2) + 8 * len(data.test.y)
    assert MAX_DATA_BYTES == 2 * 1024**3
