"""fedgc's Flower ClientApp: train locally, compress the round update, reply with the encoded update.

The client's compression memory (error feedback / DGC momentum) and the updates it sent but has not
yet heard were applied live in ``context.state``. The server's next message lists the rounds whose
updates from this client were applied (``applied-rounds``); any other pending update goes back into
the memory, so an upload that was cut or late is never lost.
"""

from __future__ import annotations

import torch
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fedgc.compress.base import CompressionContext
from fedgc.compress.memory import Memory
from fedgc.compress.update import build_compression, compress_update
from fedgc.flower.client_state import pack_state, unpack_state
from fedgc.flower.codec import encode_update
from fedgc.flower.downlink_mod import downlink_mod
from fedgc.flower.partition_grid import PARTITION_QUERY
from fedgc.flower.setup import federated_data, scenario_from_run_config
from fedgc.models import build_model
from fedgc.training import LocalTrainResult, evaluate, steps_for_epochs, train_local

MEMORY_KEY = "fedgc.memory"
PENDING_KEY = "fedgc.pending"

# The downlink mod rebuilds the model from a compressed difference (scenario `downlink`) before
# train() sees the message; without downlink compression it passes messages through.
app = ClientApp(mods=[downlink_mod])


def _load_tensors(context: Context, key: str) -> dict[str, torch.Tensor]:
    return unpack_state(context.state.array_records.get(key))


def _store_tensors(context: Context, key: str, tensors: dict[str, torch.Tensor]) -> None:
    context.state[key] = pack_state(tensors)  # a mostly-zero tensor (a pending DGC update) kept sparse


def settle_pending(memory: Memory, pending: dict[str, torch.Tensor], applied_rounds: set[int]) -> None:
    """Drop pending updates the server applied; put every other one back into the memory."""
    for key, sent in pending.items():
        round_str, name = key.split("/", 1)
        if int(round_str) not in applied_rounds:
            memory.restore(name, sent)


def client_seed(seed: int, partition: int, server_round: int) -> int:
    return (seed * 1_000_003 + partition * 7919 + server_round) % (2**63)


def local_update(msg: Message, context: Context) -> tuple[dict[str, torch.Tensor], LocalTrainResult, torch.Generator]:
    """Train on the received global model; the round update (pseudo-gradient) Δ = w_global − w_local,
    what the server subtracts scaled by its learning rate. A pure function of the message and the
    node: the same message gives the same Δ (the returned generator continues the round's stream)."""
    scenario = scenario_from_run_config(context.run_config)
    partition = int(context.node_config["partition-id"])
    data = federated_data(scenario)
    local = data.partitions[partition]
    server_round = int(msg.content.config_records["config"]["server-round"])
    model = build_model(scenario.model.name, data.input_shape, data.num_classes, scenario.seed,
                        options=scenario.model.options)
    model.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
    start = {name: t.detach().clone() for name, t in model.state_dict().items()}
    generator = torch.Generator().manual_seed(client_seed(scenario.seed, partition, server_round))
    client = scenario.client
    steps = client.local_steps or steps_for_epochs(len(local), client.batch_size, client.epochs or 1.0)
    result = train_local(model, local, steps=steps, batch_size=client.batch_size, lr=client.lr,
                         generator=generator, momentum=client.momentum, weight_decay=client.weight_decay)
    delta = {name: start[name] - t.detach() for name, t in model.state_dict().items()}
    return delta, result, generator


@app.train()
def train(msg: Message, context: Context) -> Message:
    scenario = scenario_from_run_config(context.run_config)
    partition = int(context.node_config["partition-id"])
    data = federated_data(scenario)
    local = data.partitions[partition]
    config = msg.content.config_records["config"]
    server_round = int(config["server-round"])

    compressor, memory = build_compression(scenario.compression)
    memory.load_state_dict(_load_tensors(context, MEMORY_KEY))
    settle_pending(memory, _load_tensors(context, PENDING_KEY), {int(r) for r in config.get("applied-rounds", [])})

    delta, result, generator = local_update(msg, context)
    ctx = CompressionContext(round=server_round, density=float(config["density"]), generator=generator,
                             num_clients=int(config["num-clients"]))
    compressed = compress_update(delta, compressor, memory, ctx,
                                 dense_small_tensors=scenario.compression.dense_small_tensors,
                                 value_dtype=scenario.compression.value_dtype)

    _store_tensors(context, MEMORY_KEY, memory.state_dict())
    _store_tensors(context, PENDING_KEY, {f"{server_round}/{k}": v for k, v in compressed.sent.items()})
    metrics = MetricRecord({
        "num-examples": len(local),
        "samples": result.samples,
        "steps": result.steps,
        "train-loss": result.mean_loss,
        "elements-sent": compressed.elements_sent,
        "elements-total": compressed.elements_total,
    })
    return Message(RecordDict({"update": encode_update(compressed.payloads), "metrics": metrics}), reply_to=msg)


@app.evaluate()
def evaluate_local(msg: Message, context: Context) -> Message:
    """Client-side evaluation of the received global model on the client's own partition."""
    scenario = scenario_from_run_config(context.run_config)
    data = federated_data(scenario)
    local = data.partitions[int(context.node_config["partition-id"])]
    model = build_model(scenario.model.name, data.input_shape, data.num_classes, scenario.seed,
                        options=scenario.model.options)
    model.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
    accuracy, loss = evaluate(model, local)
    metrics = MetricRecord({"num-examples": len(local), "accuracy": accuracy, "loss": loss})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)


@app.query(PARTITION_QUERY.split(".", 1)[1])
def report_partition(msg: Message, context: Context) -> Message:
    """Which partition this node holds, for the server's census on Flower's runtimes
    (``fedgc.flower.partition_grid``); set with ``--node-config "partition-id=P num-partitions=N"``."""
    config = context.node_config
    if "partition-id" not in config:
        raise ValueError('this SuperNode has no partition-id: start it with --node-config "partition-id=P ..."')
    record = MetricRecord({"partition-id": int(config["partition-id"]),
                           "num-partitions": int(config.get("num-partitions", 0))})
    return Message(RecordDict({"partition": record}), reply_to=msg)
