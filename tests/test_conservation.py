"""Nothing is lost when a link drops: over a whole run in which half the uploads fail,

    Σ(updates produced) = Σ(updates applied) + Σ(client residuals)

per parameter tensor, to float tolerance. "Produced" is every round update Δ a client computed;
"applied" the sent part of each update the server aggregated (listed per round in metrics.jsonl's
``applied_nodes``); a client's residual is its compression memory plus any pending update the server
did not apply (the client restores those into its memory on its next message).

The run is real: the fedgc ClientApp on the inline engine, the simulated network with over-selection
(select 2K, keep the first K: half the uploads are late every round) and on/off churn (some cut).
The test's ClientApp wraps fedgc's and recomputes each Δ with ``local_update`` (a pure function of the
message) to know what was produced.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedgc.compress.base import decompress
from fedgc.flower.client import client_app as fedgc_client
from fedgc.flower.client.downlink_mod import downlink_mod
from fedgc.flower.runtime.inline_grid import InlineGrid
from fedgc.flower.server.loop import run_rounds
from fedgc.flower.update_record import decode_update
from fedgc.runs.metrics import read_metrics
from fedgc.scenario.model import validate


class Ledger:
    """What each client produced and sent, seen from inside the ClientApp."""

    def __init__(self) -> None:
        self.produced: dict[int, dict[str, torch.Tensor]] = defaultdict(dict)
        self.sent: dict[tuple[int, int], dict[str, torch.Tensor]] = {}

    def client_app(self, shapes: dict[str, tuple[int, ...]]) -> ClientApp:
        app = ClientApp(mods=[downlink_mod])  # as fedgc's app: rebuilds the model from compressed downloads

        @app.train()
        def train(msg: Message, context: Context) -> Message:
            node, server_round = context.node_id, int(msg.content.config_records["config"]["server-round"])
            delta, _, _ = fedgc_client.local_update(msg, context)
            for name, d in delta.items():
                totals = self.produced[node]
                totals[name] = totals.get(name, torch.zeros_like(d, dtype=torch.float64)) + d.double()
            reply = fedgc_client.train(msg, context)
            payloads = decode_update(reply.content.array_records["update"], shapes)
            self.sent[(node, server_round)] = {n: decompress(p).double().reshape(shapes[n]) for n, p in payloads.items()}
            return reply

        return app


def residual(context: Context, applied_rounds: set[int]) -> dict[str, torch.Tensor]:
    """The client's memory after settling its pending updates, as the ClientApp would on its next message."""
    stored = fedgc_client._load_tensors(context, fedgc_client.MEMORY_KEY)
    # The residual of error feedback (``residual/``) or DGC's accumulated velocity v (``dgc_velocity/``).
    memory = {k.split("/", 1)[1]: v.double() for k, v in stored.items() if k.startswith(("residual/", "dgc_velocity/"))}
    for key, sent in fedgc_client._load_tensors(context, fedgc_client.PENDING_KEY).items():
        server_round, name = key.split("/", 1)
        if int(server_round) not in applied_rounds:
            memory[name] = memory.get(name, torch.zeros_like(sent, dtype=torch.float64)) + sent.double()
    return memory


@pytest.mark.parametrize(("compression", "downlink"), [
    ({"name": "topk", "density": 0.05, "error_feedback": True}, {"name": "none"}),
    ({"name": "dgc", "density": 0.02, "momentum_correction": False, "warmup_rounds": 2}, {"name": "none"}),
    ({"name": "dgc", "density": 0.02, "momentum_correction": False}, {"name": "topk", "density": 0.05}),
])
def test_produced_equals_applied_plus_residuals_when_half_the_uploads_fail(tmp_path, compression, downlink):
    scenario = validate({
        "name": "conservation", "seed": 11, "rounds": 8, "checkpoint_every": 0,
        "data": {"dataset": "digits", "num_clients": 8, "partition": "dirichlet", "alpha": 1.0},
        "model": {"name": "mlp"},
        "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1},
        "compression": compression,
        "downlink": downlink,
        "strategy": {"fraction": 0.25, "server_lr": 1.0},
        "network": {"profile": "3g", "bandwidth_spread": 1.0, "over_selection": 2.0,
                    "availability": "exponential", "mean_on_s": 6.0, "mean_off_s": 2.0},
        "eval": {"target_accuracy": 0.9},
    })
    from fedgc.core.parts import federated_data
    from fedgc.models import build_model

    data = federated_data(scenario)
    shapes = {k: tuple(v.shape) for k, v in build_model("mlp", data.input_shape, data.num_classes, 0).state_dict().items()}
    ledger = Ledger()
    grid = InlineGrid.for_scenario(scenario, ledger.client_app(shapes))
    run_rounds(grid, scenario, tmp_path)

    rows = read_metrics(tmp_path / "metrics.jsonl")
    applied = {(node, row["round"]) for row in rows for node in row["applied_nodes"]}
    produced_updates = len(ledger.sent)
    assert produced_updates == sum(row["selected"] - row["failed"] for row in rows)
    failed_share = 1 - len(applied) / produced_updates
    assert 0.45 <= failed_share <= 0.75, f"{failed_share:.0%} of the uploads failed"
    assert sum(row["cut"] for row in rows) > 0 and sum(row["late"] + row["discarded"] for row in rows) > 0

    for name, shape in shapes.items():
        produced = sum(ledger.produced[node][name] for node in ledger.produced)
        applied_sum = sum((ledger.sent[key][name] for key in applied), torch.zeros(shape, dtype=torch.float64))
        residuals = torch.zeros(shape, dtype=torch.float64)
        for node, context in grid.contexts.items():
            rounds = {r for (n, r) in applied if n == node}
            residuals += residual(context, rounds).get(name, torch.zeros(shape, dtype=torch.float64))
        scale = float(produced.abs().max())
        assert torch.allclose(produced, applied_sum + residuals, rtol=0, atol=1e-5 * scale), name
        # And the law is not trivially true: the residuals hold a real share of what was produced.
        assert float(residuals.abs().sum()) > 0.05 * float(produced.abs().sum()) or len(shape) <= 1
