package fedgc.client;

import fedgc.supernode.ConfigRecord;
import fedgc.supernode.Log;
import fedgc.supernode.Message;
import fedgc.supernode.MessageError;
import fedgc.supernode.MessageHandler;
import fedgc.supernode.MetricRecord;
import fedgc.supernode.NodeContext;
import fedgc.supernode.Record;
import fedgc.supernode.RecordDict;

import fedgc.compress.ClientCompression;
import fedgc.compress.CompressedUpdate;
import fedgc.compress.CompressionContext;
import fedgc.compress.Tensor;
import fedgc.train.Dataset;
import fedgc.train.MlpTrainer;
import fedgc.train.TrainConfig;
import fedgc.train.TrainResult;
import fedgc.train.Trainer;
import fedgc.wire.Codec;
import fedgc.wire.Quantize;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * fedgc's client as a {@link MessageHandler} (the app on the SDK of {@code fedgc.supernode}): the
 * dispatch of each message type and the training round. Its other jobs are in their own classes: the
 * {@code client-config} and its checks ({@link Settings}, {@link ClientChecks}), the replica and the
 * downlink digests ({@link Downlink}), the state and data files ({@link DeviceFiles}, {@link FedgcState}).
 * What fedgc's Python ClientApp: what fedgc's Python ClientApp
 * ({@code fedgc/flower/client/client_app.py} with {@code downlink_mod}) does, per docs/client-protocol.md.
 *
 * <ul>
 *   <li>{@code query.partition}: a MetricRecord {@code partition} with {@code partition-id} and
 *       {@code num-partitions} from {@code --node-config}, {@code no-replica = 1} while the node
 *       holds no downlink replica (a JVM client cannot build the run's initial model as PyTorch
 *       initializes it, so its first compressed download is the whole model), and
 *       {@code wire-versions = [1, 3]}, the update-blob versions it reads and writes, as fedgc's
 *       Python client declares them ({@code fedgc/flower/wire_versions.py}). Started with
 *       {@code --node-config "... wire-versions=1"} it declares nothing, as a client before wire
 *       format v3 did, and speaks version 1 only ({@link #WIRE_VERSIONS}).</li>
 *   <li>{@code train}: reads {@code client-config} (version 1; compressors {@code dgc} and
 *       {@code topk}, models {@code logreg} and {@code mlp}; any other compressor, model, version or
 *       {@code c.} option is refused with a one-line error reply); rebuilds the model from a compressed
 *       download ({@code model-delta} + digests, blob version 1 or 3) or adopts a reset; settles the
 *       pending update against {@code applied-rounds}; trains on {@code DATA_DIR/train.npz}; compresses
 *       Δ = w_received − w_trained at the round's {@code density}, its values as {@code c.value_dtype}
 *       says (fp32, fp16: blob version 1; int8, int4, sign: version 3); replies {@code update} and
 *       {@code metrics}, {@code update} in the form fedgc's Python client writes ({@link Codec#toUpdateRecord}:
 *       a v3 blob of at most 1 MiB as the compact ConfigRecord {@code {blob: bytes}}, else the ArrayRecord;
 *       a version-1-only node never writes v3, so never the compact form).</li>
 *   <li>{@code query.state} / {@code query.restore}: the whole state as ArrayRecords
 *       {@code jvm.memory}, {@code jvm.pending}, {@code jvm.replica}, and back.</li>
 * </ul>
 *
 * The state (memory, pending update, replica) persists in {@code DATA_DIR/fedgc-state.npz}
 * ({@link FedgcState}), written atomically after settling and again before each reply, so it survives
 * a restart of the process. {@code DATA_DIR} is {@code --data-dir}, else the node config's
 * {@code data-dir}. Subclasses may override {@link #trainer} (an on-device runtime) and
 * {@link #produced} (to observe each round's update).
 */
public class FedgcHandler implements MessageHandler {
    public static final String PARTITION_QUERY = "query.partition", STATE_QUERY = "query.state",
        RESTORE_QUERY = "query.restore", TRAIN = "train";
    public static final String TRAIN_FILE = "train.npz";
    static final String MEMORY_RECORD = "jvm.memory", PENDING_RECORD = "jvm.pending", REPLICA_RECORD = "jvm.replica";
    static final String DELTA_KEY = "model-delta", BASE_DIGEST = "downlink-base", NEW_DIGEST = "downlink-digest",
        RESET = "downlink-reset";
    /**
     * The census key of the update-blob versions a node speaks, and the node-config key that limits
     * this client to version 1 ({@code wire-versions=1}: no {@code wire-versions} in its census
     * answer, as a client before wire format v3; a v3 value encoding or a v3 download is then
     * refused). Any other value of the node-config key is refused ({@code bad-node-config}).
     */
    public static final String WIRE_VERSIONS = "wire-versions";
    /** What this client reads and writes: blob versions 1 and 3 ({@code fedgc.wire.Codec}). */
    static final long[] SPOKEN = {1, 3};

    /** The state file and the training data in DATA_DIR. */
    private final DeviceFiles files = new DeviceFiles();

    /**
     * A message the client refuses: the handler answers Flower's error reply with this one line. A
     * refusal of the protocol's table ("What a client refuses") reads {@code "<reason>: <detail>"}
     * ({@link #reason}: the code, {@link ClientChecks}); others (a download that does not fit the
     * replica, a node without data) have no code ({@link #reason} null).
     */
    public static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;
        public final String reason;

        public Refused(String message) {
            super(message);
            this.reason = null;
        }

        public Refused(String reason, String detail) {
            super(reason + ": " + detail);
            this.reason = reason;
        }
    }

    @Override
    public Message handle(Message message, NodeContext context) throws Exception {
        String type = message.metadata.messageType;
        try {
            if (PARTITION_QUERY.equals(type)) {
                return reportPartition(message, context);
            }
            if (TRAIN.equals(type)) {
                return train(message, context);
            }
            if (STATE_QUERY.equals(type)) {
                return Message.reply(message, DeviceFiles.stateRecords(state(context)));
            }
            if (RESTORE_QUERY.equals(type)) {
                files.restore(message.content(), context);
                return Message.reply(message, new RecordDict());
            }
            throw new Refused("fedgc's JVM client does not handle " + type + " messages");
        } catch (Refused e) {
            Log.error("fedgc: " + e.getMessage());
            return Message.errorReply(message, new MessageError(MessageError.CLIENT_APP_RAISED_EXCEPTION,
                "<class 'fedgc.client.FedgcHandler.Refused'>:<'" + e.getMessage() + "'>"));
        }
    }

    // ------------------------------------------------------------------ query.partition

    Message reportPartition(Message message, NodeContext context) throws Refused, IOException {
        Object partition = context.nodeConfig.get("partition-id");
        if (!(partition instanceof Long)) {
            throw new Refused("this SuperNode has no integer partition-id: start it with --node-config \"partition-id=P ...\"");
        }
        Object parts = context.nodeConfig.get("num-partitions");
        MetricRecord record = new MetricRecord();
        record.put("partition-id", partition);
        record.put("num-partitions", parts instanceof Long ? parts : 0L);
        if (state(context).replica == null) {
            record.put("no-replica", 1L);
        }
        if (speaksV3(context)) { // else: declared nothing, version 1 only
            java.util.List<Long> versions = new java.util.ArrayList<>();
            for (long v : SPOKEN) {
                versions.add(v);
            }
            record.put(WIRE_VERSIONS, versions);
        }
        RecordDict content = new RecordDict();
        content.put("partition", record);
        return Message.reply(message, content);
    }

    /**
     * Whether this node speaks wire format v3: true unless its node config says {@code wire-versions=1};
     * any other value of that key is refused in one line ({@code bad-node-config}).
     */
    static boolean speaksV3(NodeContext context) throws Refused {
        if (context.nodeConfig == null || !context.nodeConfig.containsKey(WIRE_VERSIONS)) {
            return true;
        }
        Object v = context.nodeConfig.get(WIRE_VERSIONS);
        if (!(v instanceof Long) || (Long) v != 1L) {
            throw new Refused(ClientChecks.BAD_NODE_CONFIG, WIRE_VERSIONS + "=" + ClientChecks.clip(v)
                + " is not 1 (version 1 only; leave it out for versions 1 and 3)");
        }
        return false;
    }

    // ------------------------------------------------------------------ train

    Message train(Message message, NodeContext context) throws Exception {
        RecordDict content = message.content();
        // Every field checked before any work, in the order of fedgc's Python client (checked_message):
        // the node's limits, client-config, config, the model's arrays (on their headers), the data.
        ClientChecks.NodeLimits limits = ClientChecks.NodeLimits.fromNodeConfig(context.nodeConfig);
        boolean v3 = speaksV3(context);
        Settings settings = Settings.read(content.get("client-config"), limits, otherModels());
        if (!v3 && Quantize.scaled(settings.compression().valueDtype)) {
            throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c.value_dtype is "
                + Quantize.ENCODINGS[settings.compression().valueDtype] + ", which needs wire format version 3, and this "
                + "node speaks version 1 only (node config " + WIRE_VERSIONS + "=1)");
        }
        ClientChecks.RoundConfig roundConfig = ClientChecks.roundConfig(content.get("config"), limits);
        ConfigRecord config = content.configRecord("config");
        long round = roundConfig.serverRound;
        double density = roundConfig.density;
        long numClients = roundConfig.numClients;
        Set<Long> applied = roundConfig.appliedRounds;
        ClientChecks.ModelSpec spec = settings.modelSpec(); // null: a model of a subclass's own trainer
        if (!content.containsKey(DELTA_KEY)) {
            if (spec == null) {
                spec = ClientChecks.declaredSpec(content.get("arrays"), limits);
            }
            ClientChecks.checkArrays(content.get("arrays"), spec);
        }
        Dataset local = files.localData(context, settings);
        FedgcState st = state(context);
        ClientChecks.ModelSpec held = spec != null ? spec : st.replica != null ? ClientChecks.specOf(st.replica) : null;
        if (held != null) {
            ClientChecks.checkState(st.memory, st.pending, held);
        }

        // The model: a compressed download applied to the replica, a reset, or the plain model.
        if (!v3 && Downlink.isV3(content)) {
            throw new Refused("a wire format version 3 download, and this node speaks version 1 only (node config "
                + WIRE_VERSIONS + "=1)");
        }
        LinkedHashMap<String, Tensor> model = download(content, config, st);
        ClientChecks.checkModel(model, held != null ? held : ClientChecks.specOf(model));

        // Settle the pending update first and keep that on disk: a process killed while training must
        // not restore (again) an update this message says was applied.
        ClientCompression compression = settings.compression();
        compression.memory.loadState(st.memory);
        compression.pending.entries.putAll(st.pending);
        TreeSet<Long> restored = new TreeSet<>();
        for (String key : st.pending.keySet()) {
            long r = Long.parseLong(key.substring(0, key.indexOf('/')));
            if (!applied.contains(r)) {
                restored.add(r);
            }
        }
        compression.pending.settle(compression.memory, applied);
        st.memory.clear();
        st.memory.putAll(compression.memory.state());
        st.pending.clear();
        files.save(st);
        if (!restored.isEmpty()) {
            Log.info("fedgc: round " + round + ": the update of round " + join(restored)
                + " was not applied; restored into the memory");
        }

        TrainConfig train = new TrainConfig();
        train.steps = settings.localSteps != null ? settings.localSteps.intValue()
            : TrainConfig.stepsForEpochs(local.n, settings.batchSize, settings.epochs);
        train.batchSize = settings.batchSize;
        train.lr = settings.lr;
        train.momentum = settings.momentum;
        train.weightDecay = settings.weightDecay;
        long partition = context.nodeConfig.get("partition-id") instanceof Long ? (Long) context.nodeConfig.get("partition-id") : 0L;
        train.seed = settings.seed * 1_000_003L + partition * 7919L + round; // fedgc's client_seed
        long t0 = System.nanoTime();
        TrainResult trained = trainer(local, settings).train(model, train);
        LinkedHashMap<String, Tensor> delta = Trainer.delta(model, trained.model);
        long t1 = System.nanoTime();
        CompressedUpdate update;
        try {
            update = compression.round(delta, new CompressionContext(round, density, (int) numClients), applied);
        } catch (IllegalArgumentException e) { // a v3 encoding of non-finite values, as Python's ValueError
            throw new Refused("the update cannot be encoded in " + Quantize.ENCODINGS[compression.valueDtype] + ": "
                + e.getMessage());
        }
        byte[] blob = update.encode();
        Record updateRecord = Codec.toUpdateRecord(blob); // a v3 blob up to 1 MiB in the compact form
        long t2 = System.nanoTime();
        produced(round, delta, update);
        st.memory.clear();
        st.memory.putAll(compression.memory.state());
        st.pending.clear();
        st.pending.putAll(compression.pending.entries);
        files.save(st);
        long t3 = System.nanoTime();

        MetricRecord metrics = new MetricRecord(); // the order is ReplyMetrics': part of the wire bytes
        metrics.put("num-examples", (long) local.n);
        metrics.put("samples", trained.samples);
        metrics.put("steps", (long) trained.steps);
        metrics.put("train-loss", trained.meanLoss);
        metrics.put("elements-sent", update.elementsSent);
        metrics.put("elements-total", update.elementsTotal);
        RecordDict reply = new RecordDict();
        reply.put("update", updateRecord);
        reply.put("metrics", metrics);
        Log.info(String.format("fedgc: round %d: %d steps on %d examples, loss %.4f, sent %d of %d entries "
            + "in a %d-byte blob of version %d (%s values) (train %.1f ms, compress+encode %.1f ms, state %.1f ms)",
            round, trained.steps, local.n, trained.meanLoss, update.elementsSent, update.elementsTotal, blob.length,
            update.version(), Quantize.ENCODINGS[compression.valueDtype], (t1 - t0) / 1e6, (t2 - t1) / 1e6,
            (t3 - t2) / 1e6));
        return Message.reply(message, reply);
    }

    /** The trainer for this run's model on the local data ({@link MlpTrainer}: {@code logreg}, {@code mlp}, {@code mnist_2nn}). */
    protected Trainer trainer(Dataset local, Settings settings) throws Refused {
        if (settings.hidden == null) {
            throw new Refused(ClientChecks.UNKNOWN_MODEL, "model " + settings.model
                + " has no trainer in the JVM client (logreg, mlp, mnist_2nn)");
        }
        return new MlpTrainer(local);
    }

    /**
     * The models this handler trains besides the built-in {@code logreg}, {@code mlp} and
     * {@code mnist_2nn} (none here): a subclass whose {@link #trainer} handles another model names it
     * here, or the message is refused ({@code unknown-model}) before any work. For such a model the
     * client checks {@code model-options} only as a bounded JSON object ({@link Settings#modelOptions}),
     * and sizes the model by the shapes its arrays declare (the node's {@code max-parameters}).
     */
    protected Set<String> otherModels() {
        return java.util.Collections.emptySet();
    }

    /** Called with each round's update Δ and what was sent, before the reply (no-op here). */
    protected void produced(long round, LinkedHashMap<String, Tensor> delta, CompressedUpdate update) throws IOException {}

    /** The round's global model from the message ({@link Downlink#apply}); updates the replica in {@code st}. */
    LinkedHashMap<String, Tensor> download(RecordDict content, ConfigRecord config, FedgcState st) throws Refused {
        return Downlink.apply(content, config, st);
    }

    /** This node's state for the message's run ({@link DeviceFiles#state}). */
    FedgcState state(NodeContext context) throws Refused, IOException {
        return files.state(context);
    }

    /** fedgc's {@code model_digest} ({@link Downlink#digest}). */
    public static String digest(Map<String, Tensor> weights) {
        return Downlink.digest(weights);
    }


    static String join(Set<Long> rounds) {
        StringBuilder s = new StringBuilder();
        for (Long r : rounds) {
            s.append(s.length() == 0 ? "" : ", ").append(r);
        }
        return s.toString();
    }
}
