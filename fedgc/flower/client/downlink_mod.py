"""Client half of downlink compression (``fedgc.compress.downlink``): a Flower client mod that turns
a compressed model difference back into the model, before the ClientApp sees the message.

The replica (the model this client holds) lives in ``context.state``. A client that has none yet
holds the initial model, which it builds from the run's seed exactly as the server does: a device
with its own data (node config ``data-dir``) from the train message's checked ``client-config``
(model, options, input shape, classes, seed: it never reads the run config's scenario), a
simulation's node from the run config's scenario, under its import policy (a node that cannot
announces ``no-replica`` in its partition reply and gets the whole model first:
docs/client-protocol.md). The
digest of the replica must match the server's before and after applying the difference; if not, the
mod raises and the round counts the client as failed — the server then sends the next download
dense (a reset) and the client adopts that model.
"""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict

from fedgc.compress.downlink import Weights, apply_download, as_replica, model_digest
from fedgc.core.parts import build_model_for
from fedgc.flower import keys
from fedgc.flower.client_checks import NodeLimits, record_of
from fedgc.flower.client_config import read_client_config
from fedgc.flower.keys import BASE_DIGEST, DATA_DIR, DELTA_KEY, NEW_DIGEST, PLUGINS, REPLICA_KEY, RESET
from fedgc.flower.setup import node_scenario
from fedgc.flower.state.client_state import pack_state, unpack_state
from fedgc.flower.update_record import decode_update, update_record
from fedgc.models import build_model
from fedgc.plugins.import_paths import node_policy


class DownlinkOutOfSync(RuntimeError):
    """This client's replica is not the one the server's download was computed from."""


def initial_model(context: Context, content: RecordDict | None = None) -> Weights:
    """The model every client holds before its first download. A device with its own data builds it
    from ``content``'s client-config, checked (``read_client_config``: the model known to this node,
    its size within the node's limits) under the node's import policy; a simulation's node from the
    run config's scenario (``node_scenario``; ``bad-run-config`` when it cannot read it)."""
    if context.node_config.get(DATA_DIR):
        record = record_of(content, keys.CLIENT_CONFIG, ConfigRecord) if content is not None else None
        with node_policy(context.node_config.get(PLUGINS)):
            settings = read_client_config(record, NodeLimits.from_node_config(context.node_config))
        model = build_model(settings.model, settings.input_shape, settings.num_classes, settings.seed,
                            options=settings.model_options)
        return as_replica(model.state_dict())
    return as_replica(build_model_for(node_scenario(context)).state_dict())


def _replica(context: Context, content: RecordDict | None = None) -> Weights:
    stored = record_of(context.state, REPLICA_KEY, ArrayRecord)
    return unpack_state(stored) if stored is not None else initial_model(context, content)


def rebuilt_replica(msg: Message, context: Context) -> Weights:
    """The model a compressed download makes of this client's replica, checked against both digests
    (``DownlinkOutOfSync`` otherwise); nothing is stored."""
    config = record_of(msg.content, keys.CONFIG, ConfigRecord)
    if config is None or not isinstance(config.get(BASE_DIGEST), str) or not isinstance(config.get(NEW_DIGEST), str):
        raise DownlinkOutOfSync("a compressed download without its replica digests")
    replica = _replica(context, msg.content)
    have = model_digest(replica)
    if have != config[BASE_DIGEST]:
        raise DownlinkOutOfSync(f"replica {have} is not the download's base {config[BASE_DIGEST]}")
    record = update_record(msg.content, DELTA_KEY)
    if record is None:
        raise DownlinkOutOfSync(f"a compressed download without its {DELTA_KEY!r} record")
    payloads = decode_update(record, {k: tuple(v.shape) for k, v in replica.items()})
    replica = apply_download(replica, payloads)
    if model_digest(replica) != config[NEW_DIGEST]:
        raise DownlinkOutOfSync("the replica after the download does not match the server's digest")
    return replica


def downlink_mod(msg: Message, context: Context, call_next) -> Message:
    if msg.metadata.message_type != MessageType.TRAIN or not msg.has_content():
        return call_next(msg, context)
    config = record_of(msg.content, keys.CONFIG, ConfigRecord)
    if update_record(msg.content, DELTA_KEY) is not None:
        replica = rebuilt_replica(msg, context)
        context.state[REPLICA_KEY] = pack_state(replica)
        content = RecordDict({keys.ARRAYS: ArrayRecord({k: v.contiguous() for k, v in replica.items()}), keys.CONFIG: config})
        client_config = record_of(msg.content, keys.CLIENT_CONFIG, ConfigRecord)
        if client_config is not None:
            content[keys.CLIENT_CONFIG] = client_config
        msg.content = content  # the ClientApp sees the model, as without downlink compression
    elif config is not None and config.get(RESET):
        context.state[REPLICA_KEY] = pack_state(_checked_reset(msg, context))
    return call_next(msg, context)


def _checked_reset(msg: Message, context: Context) -> Weights:
    """The whole model sent as a reset, if it has the model's tensors, shapes and finite values."""
    record = record_of(msg.content, keys.ARRAYS, ArrayRecord)
    if record is None:
        raise DownlinkOutOfSync("a reset download without the model")
    model = as_replica(record.to_torch_state_dict())
    expected = {k: tuple(v.shape) for k, v in initial_model(context, msg.content).items()}
    if {k: tuple(v.shape) for k, v in model.items()} != expected:
        raise DownlinkOutOfSync("a reset download whose tensors are not the model's")
    if not all(bool(torch.isfinite(v).all()) for v in model.values()):
        raise DownlinkOutOfSync("a reset download with non-finite values")
    return model
