"""fedgc's Flower ClientApp: train locally, compress the round update, reply with the encoded update.

The client's compression memory (error feedback / DGC momentum) and the updates it sent but has not
yet heard were applied live in ``context.state``. The server's next message lists the rounds whose
updates from this client were applied (``applied-rounds``); any other pending update goes back into
the memory, so an upload that was cut or late is never lost.

The client's training and compression settings come from the message (its ``client-config``
record, docs/client-protocol.md), as for a client in any language. A device started with
``--node-config "data-dir=DIR"`` trains on its own ``DIR/train.npz`` and never reads the run config's
scenario; a simulation's node (no ``data-dir``) reads it for its data partition
(``simulation_partition``), its ``device`` and ``deterministic`` unless its node config sets them, and,
with downlink compression, the initial replica (``fedgc.flower.client.downlink_mod``). Everything a node
handles runs under its operator's import policy (node config ``plugins``, ``node_policy_mod``): a
message or a run config never makes it import a module, or load a ``fedgc.plugins`` entry point, its
operator did not list.
"""

from __future__ import annotations

import json
import math

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

from fedgc.compress.base import CompressionContext
from fedgc.compress.memory import Memory
from fedgc.compress.update import build_compression, compress_update
from fedgc.core.parts import client_seed, federated_data
from fedgc.core.threads import pin_threads
from fedgc.data import ArrayDataset
from fedgc.data.device_files import TRAIN_FILE, check_fits, load_device_data
from fedgc.execution.device import deterministic_algorithms, resolve_device, to_device
from fedgc.execution.jobs import TrainJob
from fedgc.execution.sequential import train_one
from fedgc.execution.training import LocalTrainResult, steps_for_epochs
from fedgc.flower import keys
from fedgc.flower.client.batched import take_batched_update
from fedgc.flower.client.downlink_mod import downlink_mod
from fedgc.flower.client_checks import (
    ClientRefusal,
    NodeLimits,
    RoundConfig,
    check_memory,
    check_model_arrays,
    check_round_config,
    npy_header,
    record_of,
)
from fedgc.flower.client_config import ClientSettings, read_client_config
from fedgc.flower.keys import (
    DATA_DIR,
    DETERMINISTIC,
    DEVICE,
    MEMORY_KEY,
    PARTITION_QUERY,
    PENDING_KEY,
    PLUGINS,
    RESTORE_QUERY,
    STATE_QUERY,
    ReplyMetrics,
)
from fedgc.flower.message_size import config_content
from fedgc.flower.setup import SCENARIO_PATH, SCENARIO_YAML, node_scenario
from fedgc.flower.state.client_state import pack_state, unpack_state
from fedgc.flower.state.client_store import client_store_mod
from fedgc.flower.update_record import encode_update
from fedgc.flower.wire_versions import declare
from fedgc.models import MODELS, build_model, tensor_specs
from fedgc.plugins.import_paths import node_policy


def node_policy_mod(msg: Message, context: Context, call_next) -> Message:
    """A ClientApp mod, the outermost: the node handles the message (and reads the run config) under
    its operator's import policy, node config ``plugins="my_pkg,other_pkg"`` (none when absent)."""
    with node_policy(context.node_config.get(PLUGINS)):
        return call_next(msg, context)


# The downlink mod rebuilds the model from a compressed difference (scenario `downlink`) before
# train() sees the message; without downlink compression it passes messages through.
# With a disk store (Flower's simulation runtime), client_store_mod loads the node's state first.
app = ClientApp(mods=[node_policy_mod, client_store_mod, downlink_mod])


def _load_tensors(context: Context, key: str, device: torch.device | None = None,
                  max_elements: int | None = None) -> dict[str, torch.Tensor]:
    """Tensors kept in ``context.state`` (on the host between rounds), moved to ``device`` for this round;
    ``max_elements``: a bound on each tensor's size, checked before anything is allocated."""
    try:
        tensors = unpack_state(record_of(context.state, key, ArrayRecord), max_elements)
    except ClientRefusal:
        raise
    except (ValueError, TypeError, IndexError, RuntimeError) as err:
        raise ClientRefusal("bad-state", f"the stored {key}: {str(err).splitlines()[0][:160]}") from None
    return tensors if device is None else {name: to_device(t, device) for name, t in tensors.items()}


def _store_tensors(context: Context, key: str, tensors: dict[str, torch.Tensor]) -> None:
    context.state[key] = pack_state(tensors)  # a mostly-zero tensor (a pending DGC update) kept sparse


def settle_pending(memory: Memory, pending: dict[str, torch.Tensor], applied_rounds: set[int]) -> None:
    """Drop pending updates the server applied; put every other one back into the memory."""
    for key, sent in pending.items():
        round_str, name = key.split("/", 1)
        if int(round_str) not in applied_rounds:
            memory.restore(name, sent)


def local_data(context: Context, settings: ClientSettings) -> ArrayDataset:
    """The examples this node trains on: on a device started with ``--node-config "data-dir=DIR ..."``
    its own ``DIR/train.npz`` (``fedgc.data.device_files``), checked against the model in the message;
    otherwise (simulation) partition ``partition-id`` of the scenario's seeded split."""
    data_dir = context.node_config.get(DATA_DIR)
    if data_dir:
        local = load_device_data(str(data_dir))
        try:
            check_fits(local, settings.input_shape, settings.num_classes, f"{data_dir}/{TRAIN_FILE}")
        except ValueError as err:
            raise ClientRefusal("data-mismatch", str(err)) from None
        return local
    partition = simulation_partition(context)
    try:
        check_fits(partition, settings.input_shape, settings.num_classes, "this node's partition")
    except ValueError as err:
        raise ClientRefusal("data-mismatch", str(err)) from None
    return partition


def run_scenario(context: Context):
    """The scenario of a simulation's run config (``fedgc.flower.setup.node_scenario``: bounded YAML,
    imports only as the node's policy allows); one the node cannot read is refused as
    ``bad-run-config``, never a traceback."""
    return node_scenario(context)


def reads_run_scenario(context: Context) -> bool:
    """Whether this node takes settings from the run config's scenario: a simulation's node (no
    ``data-dir``) whose run config names one; a device with its own data never reads it."""
    return not context.node_config.get(DATA_DIR) and bool(
        context.run_config.get(SCENARIO_YAML) or context.run_config.get(SCENARIO_PATH))


def client_device(context: Context) -> torch.device:
    """Where this node trains: its node config's ``device`` (``--node-config "... device=cuda"``),
    else, in a simulation, the scenario's ``device``; ``auto`` (a GPU when there is one) otherwise."""
    spec = context.node_config.get(DEVICE)
    if spec is None and reads_run_scenario(context):
        spec = run_scenario(context).device
    return resolve_device(str(spec) if spec is not None else "auto")


def client_deterministic(context: Context) -> bool:
    """Whether this node trains with deterministic algorithms: its node config's ``deterministic``
    (``--node-config "... deterministic=true"``), else, in a simulation, the scenario's; false otherwise."""
    flag = context.node_config.get(DETERMINISTIC)
    if flag is None and reads_run_scenario(context):
        return run_scenario(context).deterministic
    return str(flag).strip().lower() in ("true", "1", "yes")


def simulation_partition(context: Context) -> ArrayDataset:
    """SIMULATION ONLY: this node's data partition, from the scenario's ``data`` section in the run
    config and the node's ``partition-id``. A device with ``data-dir`` never reads a scenario; nothing
    else of the scenario is read by the client: its settings arrive in the message (``keys.CLIENT_CONFIG``)."""
    data = federated_data(run_scenario(context))
    return data.partitions[int(context.node_config["partition-id"])]


def checked_message(content: RecordDict, context: Context) -> tuple[ClientSettings, RoundConfig, dict]:
    """The settings, the round's values and the model's tensor shapes of a train message, every field
    checked against the client-config contract and this node's limits before any work
    (``fedgc.flower.client_checks``); ``ClientRefusal`` (an error reply with its reason) otherwise."""
    limits = NodeLimits.from_node_config(context.node_config)
    settings, specs, shapes = _read_settings(record_of(content, keys.CLIENT_CONFIG, ConfigRecord), limits,
                                             context.node_config.get(PLUGINS))
    round_config = check_round_config(record_of(content, keys.CONFIG, ConfigRecord), limits)
    check_model_arrays(record_of(content, keys.ARRAYS, ArrayRecord), specs)
    return settings, round_config, dict(shapes)


SettingsRead = tuple[ClientSettings, dict[str, tuple[str, tuple[int, ...]]], dict[str, tuple[int, ...]]]
# Client configs read and accepted, by their exact content (each value's type, a float's bits), the
# node's limits and its import policy: a round's messages carry the same one (the strategy's), read
# once, not once a message. A config that is refused is never kept: it is read, and refused, each time.
_SETTINGS_READ: dict[tuple, SettingsRead] = {}
MAX_SETTINGS_READ = 64
MAX_CACHED_CONFIG_ITEMS = 256  # a client-config larger than this (unread keys included) is read every time


def _read_settings(record: object, limits: NodeLimits, plugins: object) -> SettingsRead:
    """``read_client_config`` under the node's import policy ``plugins``, with the model's tensor specs
    and shapes; the answer for the same content, limits and policy remembered (``_SETTINGS_READ``)."""
    key = None
    if isinstance(record, ConfigRecord) and len(record) <= MAX_CACHED_CONFIG_ITEMS and all(
            not isinstance(v, (list, str, bytes)) or len(v) <= MAX_CACHED_CONFIG_ITEMS for v in record.values()):
        key = (config_content(record), limits, plugins)
        known = _SETTINGS_READ.get(key)
        if known is not None:
            return known
    with node_policy(plugins):  # the modules this node's operator lets it import
        settings = read_client_config(record, limits)  # type: ignore[arg-type]  # checked there
    specs = tensor_specs(settings.model, settings.input_shape, settings.num_classes, settings.model_options)
    read = settings, specs, {name: shape for name, (_, shape) in specs.items()}
    if key is not None:
        if len(_SETTINGS_READ) >= MAX_SETTINGS_READ:
            _SETTINGS_READ.clear()
        _SETTINGS_READ[key] = read
    return read


def train_job(msg: Message | RecordDict, context: Context, local: ArrayDataset | None = None, *,
              checked: tuple[ClientSettings, RoundConfig, dict] | None = None,
              reuse_model: bool = False, load_weights: bool = True) -> tuple[nn.Module, TrainJob]:
    """The model (on the node's device, holding the received global model) and the local training a
    train message (or its content) asks of this node (``local``: its data, default ``local_data``;
    ``checked``: the message's ``checked_message``, when the caller has it). ``reuse_model``: the
    process's worker model of that kind (``worker_model``), loaded with the received weights, instead
    of a new one — for a caller done with the model before the next message. ``load_weights=False``:
    the caller loads the received weights itself (``local_update``: ``train_one`` loads its start)."""
    content = msg.content if isinstance(msg, Message) else msg
    settings, round_config, _ = checked if checked is not None else checked_message(content, context)
    local = local_data(context, settings) if local is None else local
    partition = int(context.node_config["partition-id"])
    server_round = round_config.server_round
    device = client_device(context)
    model = worker_model(settings, device) if reuse_model else None
    if model is None:
        model = build_model(settings.model, settings.input_shape, settings.num_classes, settings.seed,
                            options=settings.model_options).to(device)
    if load_weights:
        model.load_state_dict(model_tensors(_model_record(content)))
    generator = torch.Generator().manual_seed(client_seed(settings.seed, partition, server_round))
    steps = settings.local_steps or steps_for_epochs(len(local), settings.batch_size, settings.epochs or 1.0)
    return model, TrainJob(data=local, steps=steps, batch_size=settings.batch_size, lr=settings.lr,
                           generator=generator, momentum=settings.momentum, weight_decay=settings.weight_decay)


def _model_record(content: RecordDict) -> ArrayRecord:
    """The message's global model (``content.array_records[keys.ARRAYS]``: KeyError without one)."""
    record = record_of(content, keys.ARRAYS, ArrayRecord)
    if record is None:
        raise KeyError(keys.ARRAYS)
    return record


def model_tensors(record: ArrayRecord) -> dict[str, torch.Tensor]:
    """The global model's tensors from a record ``check_model_arrays`` passed: each array's values read
    past its .npy header (``npy_header``: parsed once per distinct header), as ``torch.from_numpy(
    array.numpy())`` gives them (tests/test_worker_model.py), without ``np.load`` parsing each header again."""
    tensors = {}
    for name, array in record.items():
        descr, shape, offset = npy_header(array)
        values = np.frombuffer(array.data, dtype=np.dtype(descr), offset=offset, count=math.prod(shape))
        tensors[name] = torch.from_numpy(values.reshape(shape).copy())
    return tensors


_WORKERS: dict[tuple, nn.Module] = {}
MAX_WORKER_MODELS = 4


def worker_model(settings: ClientSettings, device: torch.device) -> nn.Module | None:
    """This process's model of the message's kind, built once and reused from client to client: every
    parameter and buffer is then overwritten by ``load_state_dict`` from the message, so a reused model
    trains exactly as a new one (tests/test_worker_model.py). Only fedgc's own models (``fedgc.models``),
    whose whole state is their state dict; a plugin's model is built anew each time (None)."""
    cls = MODELS.get(settings.model)
    if cls is None or not cls.__module__.startswith("fedgc.models."):
        return None
    key = (cls, tuple(settings.input_shape), settings.num_classes,
           json.dumps(settings.model_options, sort_keys=True, default=repr), str(device))
    model = _WORKERS.get(key)
    if model is None:
        if len(_WORKERS) >= MAX_WORKER_MODELS:
            _WORKERS.clear()
        model = _WORKERS[key] = build_model(settings.model, settings.input_shape, settings.num_classes,
                                            settings.seed, options=settings.model_options).to(device)
    return model


def local_update(msg: Message, context: Context, local: ArrayDataset | None = None, *,
                 checked: tuple[ClientSettings, RoundConfig, dict] | None = None
                 ) -> tuple[dict[str, torch.Tensor], LocalTrainResult, torch.Generator]:
    """Train on the received global model; the round update (pseudo-gradient) Δ = w_global − w_local,
    what the server subtracts scaled by its learning rate. A pure function of the message, the node
    and its data (``local``, default ``local_data``): the same message gives the same Δ (the returned
    generator continues the round's stream)."""
    model, job = train_job(msg, context, local, checked=checked, reuse_model=True, load_weights=False)
    start = model_tensors(_model_record(msg.content))  # fresh tensors: train_one loads them
    # Δ on the training device: compression and its memory run there too (the payloads are written
    # from the host, fedgc.wire.codec).
    result = train_one(model, start, job, out_device=client_device(context))
    return result.delta, result.train, job.generator


@app.train()
def train(msg: Message, context: Context) -> Message:
    pin_threads()  # in Flower's workers too: the update must not depend on the engine or the load
    # The inline engine may have trained this client already, together with the round's others
    # (fedgc.flower.client.batched): then the message was checked there, and its result is used.
    handed = take_batched_update(msg)
    checked = handed.checked if handed is not None else checked_message(msg.content, context)  # once
    settings, round_config, shapes = checked
    local = local_data(context, settings)
    server_round = round_config.server_round

    # The memory (DGC's momentum and residuals, error feedback) is held on the host between rounds,
    # in context.state, and moved to the training device for this client's round only; a state the
    # server restored (--resume) is input too: checked against the model before it is used.
    device = client_device(context)
    compressor, memory = build_compression(settings.compression)
    elements = sum(math.prod(shape) for shape in shapes.values())
    stored = {key: _load_tensors(context, key, device, elements) for key in (MEMORY_KEY, PENDING_KEY)}
    check_memory(stored[MEMORY_KEY], shapes, "memory", memory)
    check_memory(stored[PENDING_KEY], shapes, "pending update")
    memory.load_state_dict(stored[MEMORY_KEY])
    settle_pending(memory, stored[PENDING_KEY], set(round_config.applied_rounds))

    if handed is not None:
        delta, result, generator = handed.delta, handed.train, handed.generator
    else:
        with deterministic_algorithms(client_deterministic(context)):
            delta, result, generator = local_update(msg, context, local, checked=checked)
    delta = {name: t.to(device) for name, t in delta.items()}  # a batched result arrives on the host
    ctx = CompressionContext(round=server_round, density=round_config.density, generator=generator,
                             num_clients=round_config.num_clients)
    compressed = compress_update(delta, compressor, memory, ctx,
                                 dense_small_tensors=settings.compression.dense_small_tensors,
                                 value_dtype=settings.compression.value_dtype, norms=settings.report_norms)

    _store_tensors(context, MEMORY_KEY, memory.state_dict())
    _store_tensors(context, PENDING_KEY, {f"{server_round}/{k}": v for k, v in compressed.sent.items()})
    metrics = ReplyMetrics(num_examples=len(local), samples=result.samples, steps=result.steps,
                           train_loss=result.mean_loss, elements_sent=compressed.elements_sent,
                           elements_total=compressed.elements_total,
                           norms=((compressed.norm_before_clip, compressed.norm_after_clip)
                                  if settings.report_norms else None))
    return Message(RecordDict({keys.UPDATE: encode_update(compressed.payloads), keys.METRICS: metrics.to_record()}),
                   reply_to=msg)


@app.query(PARTITION_QUERY.split(".", 1)[1])
def report_partition(msg: Message, context: Context) -> Message:
    """Which partition this node holds, for the server's census on Flower's runtimes
    (``fedgc.flower.server.partition_grid``); set with ``--node-config "partition-id=P num-partitions=N"``."""
    config = context.node_config
    if "partition-id" not in config:
        raise ValueError('this SuperNode has no partition-id: start it with --node-config "partition-id=P ..."')
    record = MetricRecord({keys.PARTITION_ID: int(config["partition-id"]),
                           keys.NUM_PARTITIONS: int(config.get("num-partitions", 0))})
    if config.get(keys.NO_REPLICA):  # e.g. --node-config "... no-replica=1": send me the whole model first
        record[keys.NO_REPLICA] = 1
    return Message(RecordDict({"partition": declare(record)}), reply_to=msg)  # with the wire versions it speaks


@app.query(STATE_QUERY.split(".", 1)[1])
def report_state(msg: Message, context: Context) -> Message:
    """This node's ``Context.state`` (compression memory, pending updates, downlink replica), for a
    checkpoint the server takes on Flower's runtimes (``PartitionGrid.state_dict``)."""
    return Message(RecordDict(dict(context.state.items())), reply_to=msg)


@app.query(RESTORE_QUERY.split(".", 1)[1])
def restore_state(msg: Message, context: Context) -> Message:
    """Adopt the state the server saved for this node (``--resume`` on Flower's runtimes)."""
    context.state = RecordDict(dict(msg.content.items()))
    return Message(RecordDict(), reply_to=msg)
