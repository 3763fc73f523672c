"""Poisoning: a client that scales its update or claims a huge example count is bounded by the robust
defaults (``strategy.norm_bound_factor``, ``strategy.max_weight_share``), reported in the round's
``clipped_nodes`` / ``capped_nodes``, and an honest run is left exactly as it was without them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp

from fedgc.compress.aggregate import capped_shares, norm_bounds
from fedgc.compress.base import DensePayload, SparsePayload
from fedgc.flower.client import client_app as fedgc_client
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.loop import run_rounds
from fedgc.flower.update_record import decode_update, encode_update
from fedgc.runs.metrics import read_metrics
from fedgc.scenario.model import validate

POISONER = 3


def poisoning_client_app(scale: float = 1.0, num_examples: int | None = None) -> ClientApp:
    """The real ClientApp, except that node POISONER multiplies its update by ``scale`` and claims
    ``num_examples`` examples."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        reply = fedgc_client.train(msg, context)
        if context.node_id != POISONER:
            return reply
        shapes = {k: tuple(v.shape) for k, v in msg.content.array_records["arrays"].to_torch_state_dict().items()}
        payloads = decode_update(reply.content.array_records["update"], shapes)
        scaled = {}
        for name, p in payloads.items():
            if isinstance(p, SparsePayload):
                scaled[name] = SparsePayload(p.indices, p.values * scale, p.shape)
            else:
                assert isinstance(p, DensePayload)
                scaled[name] = DensePayload(p.values * scale, p.shape)
        metrics = reply.content.metric_records["metrics"]
        if num_examples is not None:
            metrics["num-examples"] = num_examples
        return Message(RecordDict({"update": encode_update(scaled), "metrics": metrics}), reply_to=msg)

    return app


def four_clients(**strategy) -> dict:
    return {
        "name": "poison", "seed": 3, "rounds": 15,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
        "model": {"name": "mlp"},
        "client": {"local_steps": 10, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "none"},
        "strategy": {"fraction": 1.0, **strategy},
        "network": {"profile": "ideal"},
        "eval": {"target_accuracy": 0.5, "every": 15},
    }


def run(tmp_path, tree: dict, app: ClientApp | None = None):
    scenario = validate(tree)
    grid = InlineGrid.for_scenario(scenario, app)
    summary = run_rounds(grid, scenario, tmp_path)
    return summary, read_metrics(tmp_path / "metrics.jsonl")


@pytest.mark.slow
def test_a_client_scaling_its_update_by_1000_is_clipped_and_the_accuracy_stays_near_the_honest_run(tmp_path):
    honest, _ = run(tmp_path / "honest", four_clients())
    undefended, _ = run(tmp_path / "off", four_clients(norm_bound_factor=None), poisoning_client_app(1000.0))
    defended, rows = run(tmp_path / "on", four_clients(), poisoning_client_app(1000.0))
    assert undefended.final_accuracy < 0.3  # the attack works without the bound …
    assert defended.final_accuracy >= honest.final_accuracy - 0.03  # … and the default bound stops it
    assert all(row["clipped_nodes"] == [POISONER] and row["applied"] == 4 for row in rows)


@pytest.mark.slow
def test_the_robust_defaults_leave_an_honest_run_unchanged(tmp_path):
    """A quickstart-like run (DGC, label skew, half the clients a round): byte-identical metrics with
    the defaults and with both turned off, and nobody clipped or capped."""
    tree = {
        "name": "honest", "seed": 0, "rounds": 6,
        "data": {"dataset": "digits", "num_clients": 10, "partition": "dirichlet", "alpha": 1.0},
        "model": {"name": "mlp"},
        "client": {"local_steps": 10, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "dgc", "density": 0.01, "warmup_rounds": 2},
        "strategy": {"fraction": 0.5},
        "network": {"profile": "3g"},
        "eval": {"target_accuracy": 0.9},
    }
    run(tmp_path / "defaults", tree)
    off = {**tree, "strategy": {"fraction": 0.5, "norm_bound_factor": None, "max_weight_share": 1.0}}
    run(tmp_path / "off", off)
    rows = read_metrics(tmp_path / "defaults" / "metrics.jsonl")
    assert len(rows) == 6 and all(row["applied"] == 5 for row in rows)
    assert all(row["clipped_nodes"] == [] and row["capped_nodes"] == [] for row in rows)
    assert (tmp_path / "defaults" / "metrics.jsonl").read_bytes() == (tmp_path / "off" / "metrics.jsonl").read_bytes()


def test_a_client_claiming_ten_million_examples_is_capped_at_half_the_weight(tmp_path):
    _, rows = run(tmp_path, four_clients(), poisoning_client_app(1.0, num_examples=10_000_000))
    assert all(row["capped_nodes"] == [POISONER] and row["clipped_nodes"] == [] for row in rows)


def test_capped_shares_give_at_most_the_cap_and_sum_to_one():
    shares, capped = capped_shares([10_000_000, 100, 300, 100], 0.5)
    assert capped == [0] and shares[0] == 0.5
    assert shares[1:] == pytest.approx([0.1, 0.3, 0.1]) and sum(shares) == pytest.approx(1.0)
    # Redistribution can push another client over the cap: it is capped too.
    shares, capped = capped_shares([1000, 900, 50, 50], 0.4)
    assert capped == [0, 1] and shares[:2] == [0.4, 0.4] and shares[2:] == pytest.approx([0.1, 0.1])
    # Nothing over the cap: exactly FedAvg's shares.
    assert capped_shares([3, 4, 5], 0.5) == ([3 / 12, 4 / 12, 5 / 12], [])
    # A cap below 1/m cannot hold: it becomes 1/m (equal shares).
    assert capped_shares([5, 1], 0.1)[0] == [0.5, 0.5]


def test_norm_bounds_scale_only_what_exceeds_the_factor_times_the_median():
    scales, clipped = norm_bounds([1.0, 2.0, 3.0, 1000.0], 5.0)
    assert clipped == [3] and scales[:3] == [1.0, 1.0, 1.0]
    assert scales[3] * 1000.0 == pytest.approx(5.0 * 2.5)
    assert norm_bounds([0.0, 0.0, 0.0], 5.0) == ([1.0, 1.0, 1.0], [])
    assert norm_bounds([0.0, 0.0, 3.0], 5.0) == ([1.0, 1.0, 1.0], [])  # empty updates are no yardstick
    assert np.isfinite(norm_bounds([1.0, 1.0, 3e38], 5.0)[0]).all()


@pytest.mark.slow
def test_a_sign_flipping_client_inside_the_norm_bound_needs_a_robust_rule(tmp_path):
    """−4 × its update passes the norm bound (4 < 5 × the median) and wrecks the mean; the coordinate-wise
    median and trimmed mean (strategy.aggregation) keep the accuracy near the honest run."""
    honest, _ = run(tmp_path / "honest", four_clients())
    mean, rows = run(tmp_path / "mean", four_clients(), poisoning_client_app(-4.0))
    assert all(row["clipped_nodes"] == [] for row in rows) and mean.final_accuracy < 0.3
    for rule, extra in (("median", {}), ("trimmed_mean", {"trim_fraction": 0.25})):
        robust, _ = run(tmp_path / rule, four_clients(aggregation=rule, **extra), poisoning_client_app(-4.0))
        assert robust.final_accuracy >= honest.final_accuracy - 0.03, rule


def test_coordinate_wise_rules():
    from fedgc.compress.aggregate import coordinate_wise
    from fedgc.compress.base import DensePayload as D

    updates = [{"x": D(torch.tensor(v), (3,))} for v in ([1.0, 0.0, 5.0], [2.0, 0.0, -1.0], [3.0, 9.0, 0.0],
                                                         [100.0, 0.0, 1.0])]
    ones = [1.0] * 4
    assert coordinate_wise(updates, {"x": (3,)}, ones, "median")["x"].tolist() == [2.5, 0.0, 0.5]
    assert coordinate_wise(updates, {"x": (3,)}, ones, "trimmed_mean", 0.25)["x"].tolist() == [2.5, 0.0, 0.5]
    assert coordinate_wise(updates, {"x": (3,)}, ones, "trimmed_mean", 0.0)["x"].tolist() == [26.5, 2.25, 1.25]
    assert coordinate_wise(updates[:3], {"x": (3,)}, [1.0, 1.0, 0.5], "median")["x"].tolist() == [1.5, 0.0, 0.0]
