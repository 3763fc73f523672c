"""The client's settings travel in the training message (docs/client-protocol.md, client config v1).

The proof: the server builds the training messages with the loop's own strategy; fedgc's ClientApp
gets only those messages (its run config names a scenario with other training and compression
settings: only its data section, simulation-only, may be read); its replies are byte-identical to
the replies of the ClientApp as it was before, which read every setting from the scenario.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fedgc.compress.base import CompressionContext
from fedgc.compress.config import CompressionConfig
from fedgc.compress.registry import COMPRESSORS
from fedgc.compress.update import build_compression, compress_update
from fedgc.core.parts import SelectionPolicy, build_model_for, client_seed, federated_data, server_optimizer
from fedgc.execution.training import steps_for_epochs, train_local
from fedgc.flower import keys
from fedgc.flower.client import client_app as fedgc_client
from fedgc.flower.client_config import (
    SERVER_ONLY,
    ClientConfigError,
    client_config_record,
    client_option_names,
    read_client_config,
)
from fedgc.flower.keys import ReplyMetrics
from fedgc.flower.message_size import roundtrip
from fedgc.flower.server.loop import build_strategy
from fedgc.flower.setup import SCENARIO_YAML, scenario_from_run_config
from fedgc.flower.update_record import encode_update
from fedgc.scenario.model import dump_scenario, validate
from tests.flower_messages import delivered as as_pushed

NODES = 4


def old_train(msg: Message, context: Context) -> Message:
    """fedgc's ClientApp train handler before the client config: every setting from the scenario."""
    scenario = scenario_from_run_config(context.run_config)
    partition = int(context.node_config["partition-id"])
    data = federated_data(scenario)
    local = data.partitions[partition]
    config = msg.content.config_records[keys.CONFIG]
    server_round = int(config[keys.SERVER_ROUND])
    compressor, memory = build_compression(scenario.compression)
    memory.load_state_dict(fedgc_client._load_tensors(context, fedgc_client.MEMORY_KEY))
    fedgc_client.settle_pending(memory, fedgc_client._load_tensors(context, fedgc_client.PENDING_KEY),
                                {int(r) for r in config.get(keys.APPLIED_ROUNDS, [])})
    model = build_model_for(scenario, data)
    model.load_state_dict(msg.content.array_records[keys.ARRAYS].to_torch_state_dict())
    start = {name: t.detach().clone() for name, t in model.state_dict().items()}
    generator = torch.Generator().manual_seed(client_seed(scenario.seed, partition, server_round))
    client = scenario.client
    steps = client.local_steps or steps_for_epochs(len(local), client.batch_size, client.epochs or 1.0)
    result = train_local(model, local, steps=steps, batch_size=client.batch_size, lr=client.lr,
                         generator=generator, momentum=client.momentum, weight_decay=client.weight_decay)
    delta = {name: start[name] - t.detach() for name, t in model.state_dict().items()}
    ctx = CompressionContext(round=server_round, density=float(config[keys.DENSITY]), generator=generator,
                             num_clients=int(config[keys.NUM_CLIENTS]))
    compressed = compress_update(delta, compressor, memory, ctx,
                                 dense_small_tensors=scenario.compression.dense_small_tensors,
                                 value_dtype=scenario.compression.value_dtype)
    fedgc_client._store_tensors(context, fedgc_client.MEMORY_KEY, memory.state_dict())
    fedgc_client._store_tensors(context, fedgc_client.PENDING_KEY,
                                {f"{server_round}/{k}": v for k, v in compressed.sent.items()})
    metrics = ReplyMetrics(num_examples=len(local), samples=result.samples, steps=result.steps,
                           train_loss=result.mean_loss, elements_sent=compressed.elements_sent,
                           elements_total=compressed.elements_total)
    return Message(RecordDict({keys.UPDATE: encode_update(compressed.payloads), keys.METRICS: metrics.to_record()}),
                   reply_to=msg)


def _scenario(client: dict, compression: dict, model: str = "mlp"):
    return validate({"name": "cc", "seed": 7, "rounds": 3, "data": {"dataset": "digits", "num_clients": NODES,
                                                                   "partition": "iid"},
                     "model": {"name": model}, "client": client, "compression": compression,
                     "strategy": {"fraction": 1.0}, "network": {"profile": "lte"}})


SCENARIOS = {
    "dgc": _scenario({"local_steps": 3, "batch_size": 16, "lr": 0.1, "momentum": 0.5, "weight_decay": 1e-4},
                     {"name": "dgc", "density": 0.05, "momentum": 0.8, "nesterov": True, "clip_norm": 2.0,
                      "warmup_rounds": 2, "sample_ratio": 0.5, "value_dtype": "fp16", "momentum_masking": False}),
    "qsgd-epochs": _scenario({"epochs": 0.5, "batch_size": 8, "lr": 0.05},
                             {"name": "qsgd", "qsgd_levels": 7, "qsgd_bucket_size": 64, "error_feedback": True,
                              "dense_small_tensors": False}),
}
# What the node's run config names in the new client: another client and compressor, same data.
DECOY = _scenario({"local_steps": 1, "batch_size": 4, "lr": 5.0}, {"name": "topk", "density": 0.5})


def _context(node: int, scenario) -> Context:
    return Context(run_id=1, node_id=node, node_config={"partition-id": node - 1, "num-partitions": NODES},
                   state=RecordDict(), run_config={SCENARIO_YAML: dump_scenario(scenario)})


def _messages(scenario, server_round: int, strategy, arrays):
    messages = strategy.configure(server_round, arrays, list(range(1, NODES + 1)))
    arrived = []
    for i, message in enumerate(messages):
        # As the node receives it: from the wire bytes alone.
        arrived.append(roundtrip(as_pushed(message, f"m{server_round}-{i}"))[0])
    return arrived


def _reply_bytes(reply: Message) -> tuple[dict[str, bytes], dict]:
    update = reply.content.array_records[keys.UPDATE]
    return ({k: a.data for k, a in update.items()}, dict(reply.content.metric_records[keys.METRICS]))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_message_alone_gives_the_same_reply_as_the_scenario(name):
    scenario = SCENARIOS[name]
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    model = build_model_for(scenario)
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    strategy = build_strategy(scenario, federated_data(scenario), {k: tuple(v.shape) for k, v in weights.items()},
                              SelectionPolicy(1.0),
                              NODES, server_optimizer(scenario), np.random.default_rng(0))
    arrays = ArrayRecord(weights)
    old_contexts = {n: _context(n, scenario) for n in range(1, NODES + 1)}
    new_contexts = {n: _context(n, DECOY) for n in range(1, NODES + 1)}  # settings only from the message
    for server_round in (1, 2, 3):  # the memory and the pending updates carry across rounds
        for msg in _messages(scenario, server_round, strategy, arrays):
            assert set(msg.content.config_records) == {keys.CONFIG, keys.CLIENT_CONFIG}
            node = msg.metadata.dst_node_id
            if server_round == 2:  # the server applied round 1's update of some nodes only
                msg.content.config_records[keys.CONFIG][keys.APPLIED_ROUNDS] = [1] if node % 2 else []
            old = old_train(msg, old_contexts[node])
            new = fedgc_client.train(msg, new_contexts[node])
            assert _reply_bytes(new) == _reply_bytes(old), (name, server_round, node)
            assert dict(new_contexts[node].state.items()).keys() == dict(old_contexts[node].state.items()).keys()
    # The decoy's settings would have given another reply: the client did not read them.
    decoy_msg = _messages(scenario, 4, strategy, arrays)[0]
    decoy_msg.content.config_records[keys.CLIENT_CONFIG] = client_config_record(DECOY, (1, 8, 8), 10)
    fresh = _context(1, scenario)
    assert _reply_bytes(fedgc_client.train(decoy_msg, fresh)) != _reply_bytes(old_train(decoy_msg, _context(1, scenario)))


def test_record_round_trips_and_holds_only_the_compressors_options():
    scenario = SCENARIOS["dgc"]
    record = client_config_record(scenario, (1, 8, 8), 10)
    assert record[keys.CC_VERSION] == 1 and record[keys.CC_COMPRESSOR] == "dgc"
    options = {k[2:] for k in record if k.startswith(keys.CC_COMPRESSION_PREFIX)}
    assert options == set(client_option_names("dgc")) and "clip_norm" in options and "qsgd_levels" not in options
    assert not options & SERVER_ONLY
    settings = read_client_config(record)
    assert (settings.model, settings.seed, settings.local_steps, settings.epochs, settings.batch_size, settings.lr,
            settings.momentum, settings.weight_decay) == ("mlp", 7, 3, None, 16, 0.1, 0.5, 1e-4)
    for option in client_option_names("dgc"):
        assert getattr(settings.compression.options, option) == getattr(scenario.compression.options, option)
    epochs = read_client_config(client_config_record(SCENARIOS["qsgd-epochs"], (1, 8, 8), 10))
    assert (epochs.local_steps, epochs.epochs, epochs.compression.options.qsgd_levels) == (None, 0.5, 7)


def test_every_compression_option_reaches_the_client_that_reads_it():
    """No option is silently left behind: the section's keys are the server's and the named
    compressor's options, and its clients are sent every option (DGC ignores error_feedback)."""
    for name, cls in COMPRESSORS.items():
        keys_of_section = set(CompressionConfig(name=name).model_dump()) - SERVER_ONLY
        assert set(client_option_names(name)) | ({"error_feedback"} - {*cls.Options.model_fields}) <= keys_of_section
        assert keys_of_section == set(cls.Options.model_fields), name
        assert set(client_option_names(name)) == keys_of_section - ({"error_feedback"} if name == "dgc" else set())


@pytest.mark.parametrize("change, error", [
    (lambda r: r.pop(keys.CC_VERSION), "version"),
    (lambda r: r.__setitem__(keys.CC_VERSION, 2), "version 2"),
    (lambda r: r.__setitem__("c.qsgd_levels", 3), "does not read"),
    (lambda r: r.__setitem__(keys.CC_COMPRESSOR, "zip"), "unknown compressor"),
    (lambda r: r.__setitem__(keys.CC_EPOCHS, 1.0), "exactly one"),
    (lambda r: r.__setitem__(keys.CC_BATCH_SIZE, "16"), "batch-size"),
    (lambda r: r.__setitem__("c.momentum", 1.5), "compression options"),
])
def test_a_bad_client_config_is_refused(change, error):
    record = ConfigRecord(dict(client_config_record(SCENARIOS["dgc"], (1, 8, 8), 10)))
    change(record)
    with pytest.raises(ClientConfigError, match=error):
        read_client_config(record)
    with pytest.raises(ClientConfigError, match="no 'client-config'"):
        read_client_config(None)


def test_each_compressor_reads_exactly_its_own_options_and_common_ones():
    """An option is declared once, in its compressor's Options model; a compressor's clients are sent
    its Options' fields, in their order, and no other compressor's."""
    from fedgc.compress.base import CompressorOptions

    for name, cls in COMPRESSORS.items():
        read = client_option_names(name)
        assert read == tuple(f for f in cls.Options.model_fields if f != "error_feedback" or cls.reads_error_feedback)
        assert set(read) >= set(CompressorOptions.model_fields) - {"error_feedback"}, name
