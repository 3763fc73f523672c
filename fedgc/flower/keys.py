"""The keys of fedgc's Flower messages, in one place (the JVM client speaks the same ones).

A training message holds the global model under ``ARRAYS`` (or, with downlink compression, a
difference: ``fedgc.flower.server.downlink_stage``), a ``CONFIG`` record (this round's values) and a
``CLIENT_CONFIG`` record (the client's settings); its reply holds the encoded update under ``UPDATE``
and a ``METRICS`` record whose contract is ``ReplyMetrics``. The contract: docs/client-protocol.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from flwr.app import MetricRecord

# Records of a training message and of its reply.
ARRAYS = "arrays"
CONFIG = "config"
UPDATE = "update"
METRICS = "metrics"

# The training message's config record.
SERVER_ROUND = "server-round"
DENSITY = "density"  # compression density for this round (warm-up applied)
NUM_CLIENTS = "num-clients"  # K, the updates aggregated per round (DGC's N)
APPLIED_ROUNDS = "applied-rounds"  # rounds whose update from this node the server applied since it last heard

# The training message's client-config record (docs/client-protocol.md): everything a client needs
# to train and compress, so that no client reads the scenario. Built by ``fedgc.flower.client_config``.
CLIENT_CONFIG = "client-config"
CLIENT_CONFIG_VERSION = 1
CC_VERSION = "version"  # int: CLIENT_CONFIG_VERSION
CC_MODEL = "model"  # str: the model's name (docs/data-and-models.md)
CC_MODEL_OPTIONS = "model-options"  # str, JSON object: the model's options (absent: none)
CC_INPUT_SHAPE = "input-shape"  # list of int: one example's shape, as the model takes it (e.g. [1, 28, 28])
CC_NUM_CLASSES = "num-classes"  # int: the model's number of classes (labels are 0..num-classes-1)
CC_SEED = "seed"  # int: the run's seed, for the client's per-round random stream
CC_LOCAL_STEPS = "local-steps"  # int: SGD steps per round (exactly one of local-steps / epochs)
CC_EPOCHS = "epochs"  # float: passes over the client's data per round
CC_BATCH_SIZE = "batch-size"  # int
CC_LR = "lr"  # float: local SGD learning rate
CC_MOMENTUM = "momentum"  # float: local SGD momentum
CC_WEIGHT_DECAY = "weight-decay"  # float: local SGD weight decay
CC_COMPRESSOR = "compressor"  # str: the compressor's name (docs/compressors.md)
CC_REPORT_NORMS = "report-norms"  # bool, only present when true: report NORM_BEFORE_CLIP / NORM_AFTER_CLIP
CC_COMPRESSION_PREFIX = "c."  # "c.<option>": each compression option the client reads (absent: unset)

# The partition reply (``query.partition``): a MetricRecord "partition".
PARTITION_ID = "partition-id"
NUM_PARTITIONS = "num-partitions"
NO_REPLICA = "no-replica"  # int 1: the node holds no replica of the initial model; first download whole
WIRE_VERSIONS = "wire-versions"  # list of ints: the update-blob versions the node reads and writes; absent: [1]

# The reply's metrics record (``ReplyMetrics``).
NUM_EXAMPLES = "num-examples"
SAMPLES = "samples"
STEPS = "steps"
TRAIN_LOSS = "train-loss"
ELEMENTS_SENT = "elements-sent"
ELEMENTS_TOTAL = "elements-total"
# Reported only when the client config asks for them (CC_REPORT_NORMS): the L2 norm of the round's
# update before and after the compressor's local clipping (equal when it clips nothing).
NORM_BEFORE_CLIP = "norm-before-clip"
NORM_AFTER_CLIP = "norm-after-clip"

# A node's config (``flower-supernode --node-config``) and its Context.state.
DATA_DIR = "data-dir"  # node config: the folder holding the device's own train.npz
DEVICE = "device"  # node config: auto | cpu | cuda | cuda:N
PLUGINS = "plugins"  # node config: modules a message's import paths may name (comma-separated); default none
DETERMINISTIC = "deterministic"  # node config: true → deterministic algorithms on CUDA
MEMORY_KEY = "fedgc.memory"
PENDING_KEY = "fedgc.pending"
REPLICA_KEY = "fedgc.replica"

# Compressed downloads (docs/downlink.md).
DELTA_KEY = "model-delta"  # the compressed difference, in place of the "arrays" record
BASE_DIGEST = "downlink-base"  # digest of the replica the difference applies to
NEW_DIGEST = "downlink-digest"  # digest of the replica once the difference is applied
RESET = "downlink-reset"  # True: "arrays" is the whole model; adopt it as the replica

# Queries the server asks nodes outside training.
PARTITION_QUERY = "query.partition"  # message type the ClientApp answers with its partition
# Checkpoints on Flower's runtimes, where the clients' states live on the nodes: the server asks each
# node for its Context.state, and on resume hands it back. Not training traffic: never charged to
# the simulated network or counted in the byte metrics.
STATE_QUERY = "query.state"
RESTORE_QUERY = "query.restore"

# The run config (``flwr run --run-config``; declared in pyproject.toml).
# Run-config keys; every one has a default in pyproject's [tool.flwr.app.config], since `flwr run`
# only accepts overrides of declared keys (an empty string means "not set").
SCENARIO_YAML = "scenario-yaml"  # the resolved scenario, inline (set by fedgc.cli.run)
SCENARIO_PATH = "scenario"  # or a path to a scenario file
OUT_DIR = "out-dir"  # where the ServerApp writes metrics.jsonl, summary.json, plots, model.pt
QUIET = "quiet"  # no progress bar
NODE_WAIT_S = "node-wait-s"  # how long the ServerApp waits for SuperNodes to connect
# Flower's simulation runtime: the engine names the folder of the run's disk store in the run config
# (``fedgc.flower.runtime.flower_engine``); the ClientApp's ``client_store_mod`` then loads each node's state
# from it for the node's message and writes it back after, so Flower's contexts hold nothing between turns.
CLIENT_STORE_DIR = "client-store-dir"

@dataclass(frozen=True)
class ReplyMetrics:
    """What a client reports with its update. The server trusts none of it: ``fedgc.flower.server.validate``
    checks every value against the decoded update before it weighs or times anything."""

    num_examples: int  # the size of the client's partition: its aggregation weight
    samples: int  # samples processed in training: its simulated compute time
    steps: int
    train_loss: float
    elements_sent: int
    elements_total: int
    norms: tuple[float, float] | None = None  # (before, after) local clipping: only when the config asks

    def to_record(self) -> MetricRecord:
        # The order is part of the wire bytes: keep it.
        record = MetricRecord({NUM_EXAMPLES: self.num_examples, SAMPLES: self.samples, STEPS: self.steps,
                               TRAIN_LOSS: self.train_loss, ELEMENTS_SENT: self.elements_sent,
                               ELEMENTS_TOTAL: self.elements_total})
        if self.norms is not None:
            record[NORM_BEFORE_CLIP], record[NORM_AFTER_CLIP] = float(self.norms[0]), float(self.norms[1])
        return record
