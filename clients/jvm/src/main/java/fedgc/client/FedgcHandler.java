package fedgc.client;

import fedgc.wire.Unsigned;
import fedgc.compress.ClientCompression;
import fedgc.compress.CompressedUpdate;
import fedgc.compress.CompressionContext;
import fedgc.compress.Compressor;
import fedgc.compress.Dgc;
import fedgc.compress.DgcMemory;
import fedgc.compress.Memory;
import fedgc.compress.NoMemory;
import fedgc.compress.ResidualMemory;
import fedgc.compress.Tensor;
import fedgc.compress.TopK;
import fedgc.train.Dataset;
import fedgc.train.MlpTrainer;
import fedgc.train.TrainConfig;
import fedgc.train.TrainResult;
import fedgc.train.Trainer;
import fedgc.wire.Payload;
import java.io.File;
import java.io.IOException;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * fedgc's client as a {@link MessageHandler}: what fedgc's Python ClientApp
 * ({@code fedgc/flower/client_app.py} with {@code downlink_mod}) does, per docs/client-protocol.md.
 *
 * <ul>
 *   <li>{@code query.partition}: a MetricRecord {@code partition} with {@code partition-id} and
 *       {@code num-partitions} from {@code --node-config}, and {@code no-replica = 1} while the node
 *       holds no downlink replica (a JVM client cannot build the run's initial model as PyTorch
 *       initializes it, so its first compressed download is the whole model).</li>
 *   <li>{@code train}: reads {@code client-config} (version 1; compressors {@code dgc} and
 *       {@code topk}, models {@code logreg} and {@code mlp}; any other compressor, model, version or
 *       {@code c.} option is refused with a one-line error reply); rebuilds the model from a compressed
 *       download ({@code model-delta} + digests) or adopts a reset; settles the pending update against
 *       {@code applied-rounds}; trains on {@code DATA_DIR/train.npz}; compresses Δ = w_received −
 *       w_trained at the round's {@code density}; replies {@code update} and {@code metrics}.</li>
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
    static final List<String> DGC_OPTIONS = Arrays.asList("value_dtype", "dense_small_tensors", "momentum", "nesterov",
        "momentum_correction", "momentum_masking", "clip_norm", "momentum_dtype", "sample_ratio");
    static final List<String> TOPK_OPTIONS = Arrays.asList("value_dtype", "dense_small_tensors", "error_feedback");

    private FedgcState state;
    private File stateFile;
    private Dataset data;
    private File dataFile;
    private long dataModified;

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
                return Message.reply(message, stateRecords(state(context)));
            }
            if (RESTORE_QUERY.equals(type)) {
                restore(message, context);
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
        RecordDict content = new RecordDict();
        content.put("partition", record);
        return Message.reply(message, content);
    }

    // ------------------------------------------------------------------ train

    Message train(Message message, NodeContext context) throws Exception {
        RecordDict content = message.content();
        // Every field checked before any work, in the order of fedgc's Python client (checked_message):
        // the node's limits, client-config, config, the model's arrays (on their headers), the data.
        ClientChecks.NodeLimits limits = ClientChecks.NodeLimits.fromNodeConfig(context.nodeConfig);
        Settings settings = Settings.read(content.get("client-config"), limits, otherModels());
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
        Dataset local = localData(context, settings);
        FedgcState st = state(context);
        ClientChecks.ModelSpec held = spec != null ? spec : st.replica != null ? ClientChecks.specOf(st.replica) : null;
        if (held != null) {
            ClientChecks.checkState(st.memory, st.pending, held);
        }

        // The model: a compressed download applied to the replica, a reset, or the plain model.
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
        save(st);
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
        CompressedUpdate update = compression.round(delta, new CompressionContext(round, density, (int) numClients),
            applied);
        ArrayRecord updateRecord = update.toRecord();
        long t2 = System.nanoTime();
        produced(round, delta, update);
        st.memory.clear();
        st.memory.putAll(compression.memory.state());
        st.pending.clear();
        st.pending.putAll(compression.pending.entries);
        save(st);
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
            + "(train %.1f ms, compress+encode %.1f ms, state %.1f ms)", round, trained.steps, local.n, trained.meanLoss,
            update.elementsSent, update.elementsTotal, (t1 - t0) / 1e6, (t2 - t1) / 1e6, (t3 - t2) / 1e6));
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

    /** fedgc's {@code model_digest} ({@link Downlink#digest}). */
    public static String digest(Map<String, Tensor> weights) {
        return Downlink.digest(weights);
    }

    // ------------------------------------------------------------------ state and data

    static File dataDir(NodeContext context) throws Refused {
        if (context.dataDir != null) {
            return context.dataDir;
        }
        Object dir = context.nodeConfig.get("data-dir");
        if (dir instanceof String && !((String) dir).isEmpty()) {
            return new File((String) dir);
        }
        throw new Refused("no device data: start the node with --data-dir DIR (or --node-config \"data-dir='DIR'\")");
    }

    /**
     * This node's state for the message's run: loaded from {@code DATA_DIR/fedgc-state.npz} the first
     * time; a state that belongs to another run (or to none) is set aside for an empty one, as Flower
     * gives each run a fresh {@code Context.state} (an old run's memory, pending update or replica must
     * not leak into a new run).
     */
    synchronized FedgcState state(NodeContext context) throws Refused, IOException {
        if (state == null) {
            File dir = dataDir(context);
            if (!dir.isDirectory()) {
                throw new Refused("data-dir " + dir + " is not a directory");
            }
            stateFile = new File(dir, FedgcState.FILE_NAME);
            try {
                state = FedgcState.load(stateFile);
            } catch (IOException e) {
                throw new Refused("cannot read the client state " + stateFile + ": " + e.getMessage());
            }
            if (stateFile.exists()) {
                Log.info("fedgc: state loaded from " + stateFile + " (run " + (state.runId == null ? "?" : Unsigned.toString(state.runId))
                    + ", " + state.memory.size() + " memory tensors, " + state.pending.size() + " pending, replica "
                    + (state.replica == null ? "none" : digest(state.replica)) + ")");
            }
        }
        if (state.runId == null || state.runId != context.runId) {
            if (state.runId != null || !state.memory.isEmpty() || !state.pending.isEmpty() || state.replica != null) {
                Log.info("fedgc: the state in " + stateFile + " belongs to run "
                    + (state.runId == null ? "?" : Unsigned.toString(state.runId)) + "; run "
                    + Unsigned.toString(context.runId) + " starts with an empty one");
            }
            state = new FedgcState();
            state.runId = context.runId;
        }
        return state;
    }

    void save(FedgcState st) throws IOException {
        st.save(stateFile);
    }

    Dataset localData(NodeContext context, Settings settings) throws Refused {
        File file = new File(dataDir(context), TRAIN_FILE);
        if (!file.isFile()) {
            throw new Refused("no device data: " + file + " does not exist (expected an .npz of x and y)");
        }
        if (data == null || !file.equals(dataFile) || file.lastModified() != dataModified) {
            try {
                data = Dataset.loadNpz(file);
            } catch (IOException | RuntimeException e) {
                throw new Refused(file + ": not a readable .npz of x and y (" + e.getMessage() + ")");
            }
            dataFile = file;
            dataModified = file.lastModified();
        }
        if (!Arrays.equals(data.inputShape, settings.inputShape)) {
            throw new Refused(ClientChecks.DATA_MISMATCH, file + ": examples of shape " + Npy.shapeRepr(data.inputShape)
                + ", but the model takes "
                + Npy.shapeRepr(settings.inputShape));
        }
        if (data.n == 0) {
            throw new Refused(file + ": holds no examples");
        }
        for (int label : data.y) {
            if (label < 0 || label >= settings.numClasses) {
                throw new Refused(ClientChecks.DATA_MISMATCH, file + ": label " + label + " out of range for "
                    + settings.numClasses + " classes");
            }
        }
        for (float v : data.x) {
            if (Float.isNaN(v) || Float.isInfinite(v)) {
                throw new Refused(ClientChecks.DATA_MISMATCH, file + ": x holds NaN or infinite values");
            }
        }
        return data;
    }

    static RecordDict stateRecords(FedgcState st) {
        RecordDict out = new RecordDict();
        ArrayRecord memory = new ArrayRecord();
        for (Map.Entry<String, float[]> e : st.memory.entrySet()) {
            memory.put(e.getKey(), Array.ofFloat32(e.getValue()));
        }
        ArrayRecord pending = new ArrayRecord();
        for (Map.Entry<String, float[]> e : st.pending.entrySet()) {
            pending.put(e.getKey(), Array.ofFloat32(e.getValue()));
        }
        out.put(MEMORY_RECORD, memory);
        out.put(PENDING_RECORD, pending);
        if (st.replica != null) {
            ArrayRecord replica = new ArrayRecord();
            for (Map.Entry<String, Tensor> e : st.replica.entrySet()) {
                replica.put(e.getKey(), e.getValue().toArray());
            }
            out.put(REPLICA_RECORD, replica);
        }
        return out;
    }

    void restore(Message message, NodeContext context) throws Refused, IOException {
        state(context);
        FedgcState st = new FedgcState();
        st.runId = context.runId;
        for (Map.Entry<String, Record> e : message.content().entrySet()) {
            if (!(e.getValue() instanceof ArrayRecord) || !(MEMORY_RECORD.equals(e.getKey())
                    || PENDING_RECORD.equals(e.getKey()) || REPLICA_RECORD.equals(e.getKey()))) {
                throw new Refused(ClientChecks.BAD_STATE, "query.restore: record " + ClientChecks.clip(e.getKey())
                    + " is not this client's state");
            }
            for (Map.Entry<String, Array> a : ((ArrayRecord) e.getValue()).entrySet()) {
                Tensor t;
                try {
                    Npy.header(a.getValue().data, ClientChecks.NPY_HEADER_MAX); // bounded, before anything is decoded
                    t = Tensor.fromArray(a.getValue());
                } catch (RuntimeException err) {
                    throw new Refused(ClientChecks.BAD_STATE, "query.restore: " + e.getKey() + "/"
                        + ClientChecks.clip(a.getKey()) + ": " + ClientChecks.clip(err.getMessage()));
                }
                if (MEMORY_RECORD.equals(e.getKey())) {
                    st.memory.put(a.getKey(), t.data);
                } else if (PENDING_RECORD.equals(e.getKey())) {
                    st.pending.put(a.getKey(), t.data);
                } else {
                    if (st.replica == null) {
                        st.replica = new LinkedHashMap<>();
                    }
                    st.replica.put(a.getKey(), t);
                }
            }
        }
        state = st;
        save(st);
        Log.info("fedgc: state restored (" + st.memory.size() + " memory tensors, " + st.pending.size() + " pending)");
    }

    // ------------------------------------------------------------------ client-config

    /**
     * The {@code client-config} record (version 1), every field checked by the rules of
     * docs/client-protocol.md ("What a client refuses", as fedgc's Python client's
     * {@code read_client_config}) and the node's limits, as far as this client implements it: types
     * strict (an int for a float is fine, a bool or a string never), ranges as in the table,
     * compressors {@code dgc} and {@code topk} with their options' own ranges, models {@code logreg},
     * {@code mlp} and {@code mnist_2nn} (any other: {@code unknown-model}), sized before anything is
     * built ({@code too-large}).
     */
    public static final class Settings {
        public String model, compressor;
        public long[] inputShape;
        /** The hidden widths of a built-in model; null for a model of a subclass's own trainer. */
        public long[] hidden;
        /** {@code model-options} as read (a bounded JSON object; empty when absent). */
        public Map<String, Object> modelOptions;
        public int numClasses, batchSize;
        public long seed;
        public Long localSteps;
        public double epochs, lr, momentum, weightDecay;
        public final Map<String, Object> options = new LinkedHashMap<>();

        static Settings read(ConfigRecord record) throws Refused {
            return read(record, ClientChecks.NodeLimits.DEFAULT, java.util.Collections.<String>emptySet());
        }

        static Settings read(Record given, ClientChecks.NodeLimits limits, Set<String> otherModels) throws Refused {
            if (!(given instanceof ConfigRecord)) {
                throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "the training message has no 'client-config' record");
            }
            ConfigRecord record = (ConfigRecord) given;
            Long version = ClientChecks.asInt(record.get("version"));
            if (version == null || version != 1) {
                throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config version "
                    + (version != null ? String.valueOf(version) : ClientChecks.describe(record, "version"))
                    + "; this client speaks 1");
            }
            Settings s = new Settings();
            s.compressor = ClientChecks.string(record, "compressor");
            List<String> known;
            if ("dgc".equals(s.compressor)) {
                known = DGC_OPTIONS;
            } else if ("topk".equals(s.compressor)) {
                known = TOPK_OPTIONS;
            } else {
                throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "compressor " + ClientChecks.clip(s.compressor)
                    + " is not implemented by the JVM client (dgc, topk)");
            }
            for (Map.Entry<String, Object> e : record.entrySet()) {
                if (e.getKey().startsWith("c.")) {
                    String option = e.getKey().substring(2);
                    if (!known.contains(option)) {
                        throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config has option "
                            + ClientChecks.clip(option) + ", which " + s.compressor + " in the JVM client does not read");
                    }
                    s.options.put(option, e.getValue());
                }
            }
            s.compression(); // refuse bad option values now
            boolean steps = record.containsKey("local-steps"), epochs = record.containsKey("epochs");
            if (steps) {
                s.localSteps = ClientChecks.integer(record, "local-steps", 1, limits.maxLocalSteps,
                    ClientChecks.BAD_CLIENT_CONFIG);
            }
            if (epochs) {
                s.epochs = ClientChecks.number(record, "epochs", 0.0, limits.maxEpochs, true, false,
                    ClientChecks.BAD_CLIENT_CONFIG);
            }
            if (steps == epochs) {
                throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config needs exactly one of 'local-steps' and 'epochs'");
            }
            s.model = ClientChecks.string(record, "model");
            boolean builtIn = ClientChecks.defaultHidden(s.model) != null;
            if (!builtIn && !otherModels.contains(s.model)) {
                throw new Refused(ClientChecks.UNKNOWN_MODEL, "client-config names a model this node does not have: "
                    + ClientChecks.clip(s.model) + " (the JVM client has logreg, mlp, mnist_2nn)");
            }
            s.modelOptions = ClientChecks.modelOptions(record);
            s.hidden = builtIn ? ClientChecks.hiddenWidths(s.modelOptions, s.model) : null;
            Object shape = record.get("input-shape");
            List<?> dims = shape instanceof List ? (List<?>) shape : null;
            boolean ok = dims != null && dims.size() >= 1 && dims.size() <= ClientChecks.MAX_INPUT_DIMS;
            double elements = 1;
            s.inputShape = new long[ok ? dims.size() : 0];
            for (int i = 0; ok && i < s.inputShape.length; i++) {
                Long d = ClientChecks.asInt(dims.get(i));
                ok = d != null && d >= 1 && d <= ClientChecks.MAX_INPUT_SIDE;
                s.inputShape[i] = ok ? d : 0;
                elements *= s.inputShape[i];
            }
            if (!ok || elements > ClientChecks.MAX_INPUT_ELEMENTS) {
                throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config 'input-shape' is "
                    + ClientChecks.describe(record, "input-shape") + ", not 1 to " + ClientChecks.MAX_INPUT_DIMS
                    + " positive sides of at most " + ClientChecks.MAX_INPUT_SIDE + " and "
                    + ClientChecks.MAX_INPUT_ELEMENTS + " elements in all");
            }
            s.numClasses = (int) ClientChecks.integer(record, "num-classes", 1, ClientChecks.MAX_CLASSES,
                ClientChecks.BAD_CLIENT_CONFIG);
            s.seed = ClientChecks.integer(record, "seed", 0, 0xFFFFFFFFL, ClientChecks.BAD_CLIENT_CONFIG);
            s.batchSize = (int) ClientChecks.integer(record, "batch-size", 1, limits.maxBatchSize,
                ClientChecks.BAD_CLIENT_CONFIG);
            s.lr = ClientChecks.number(record, "lr", 0.0, 1e6, true, false, ClientChecks.BAD_CLIENT_CONFIG);
            s.momentum = ClientChecks.number(record, "momentum", 0.0, 1.0, false, true, ClientChecks.BAD_CLIENT_CONFIG);
            s.weightDecay = ClientChecks.number(record, "weight-decay", 0.0, 1e6, false, false,
                ClientChecks.BAD_CLIENT_CONFIG);
            ClientChecks.ModelSpec spec = s.modelSpec();
            if (spec != null && spec.parameters > limits.maxParameters) {
                throw new Refused(ClientChecks.TOO_LARGE, "model " + s.model + " for input " + Npy.shapeRepr(s.inputShape)
                    + " and " + s.numClasses + " classes has " + String.format("%.0f", spec.parameters)
                    + " parameters, more than this node's " + limits.maxParameters);
            }
            return s;
        }

        /** The model's tensors and parameter count (nothing allocated); null for a model of a subclass's own trainer. */
        public ClientChecks.ModelSpec modelSpec() {
            return hidden == null ? null : new ClientChecks.ModelSpec(inputShape, numClasses, hidden);
        }

        /** The compressor, its memory and the payload settings the options name (each option's type and range checked). */
        ClientCompression compression() throws Refused {
            boolean dense = flag("dense_small_tensors", true);
            Object dtype = options.containsKey("value_dtype") ? options.get("value_dtype") : "fp32";
            int valueDtype;
            if ("fp32".equals(dtype)) {
                valueDtype = Payload.F32;
            } else if ("fp16".equals(dtype)) {
                valueDtype = Payload.F16;
            } else {
                throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c.value_dtype is "
                    + ClientChecks.clip(dtype) + ", not fp32 or fp16");
            }
            Compressor method;
            Memory memory;
            if ("dgc".equals(compressor)) {
                Double clip = option("clip_norm", null, 0.0, Double.MAX_VALUE, true, false);
                method = new Dgc(clip);
                double m = option("momentum", 0.9, 0.0, 1.0, false, true);
                DgcMemory dgc = new DgcMemory(m, flag("nesterov", false),
                    flag("momentum_correction", true), flag("momentum_masking", true), dense);
                Object momentumDtype = options.containsKey("momentum_dtype") ? options.get("momentum_dtype") : "fp32";
                if (!"fp32".equals(momentumDtype) && !"bf16".equals(momentumDtype)) {
                    throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c.momentum_dtype is "
                        + ClientChecks.clip(momentumDtype) + ", not fp32 or bf16");
                }
                dgc.momentumBf16 = "bf16".equals(momentumDtype);
                option("sample_ratio", 0.01, 0.0, 1.0, true, false); // the JVM selects exactly (as sample_ratio 1.0)
                memory = dgc;
            } else {
                method = new TopK();
                memory = flag("error_feedback", true) ? new ResidualMemory() : new NoMemory();
            }
            return new ClientCompression(method, memory, dense, valueDtype);
        }

        /** A number option ({@code otherwise} when absent): finite, in the interval, an int or a float (never a bool or a string). */
        Double option(String option, Double otherwise, double low, double high, boolean lowOpen, boolean highOpen)
                throws Refused {
            if (!options.containsKey(option)) {
                return otherwise;
            }
            Double v = ClientChecks.asNumber(options.get(option));
            boolean inside = v != null && !Double.isNaN(v) && !Double.isInfinite(v)
                && (lowOpen ? low < v : low <= v) && (highOpen ? v < high : v <= high);
            if (!inside) {
                throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c." + option + " is "
                    + ClientChecks.typeName(options.get(option)) + " " + ClientChecks.clip(options.get(option))
                    + ", not a finite number in " + (lowOpen ? "(" : "[") + low + ", "
                    + (high == Double.MAX_VALUE ? "inf" : String.valueOf(high)) + (highOpen ? ")" : "]"));
            }
            return v;
        }

        boolean flag(String option, boolean otherwise) throws Refused {
            if (!options.containsKey(option)) {
                return otherwise;
            }
            Object v = options.get(option);
            if (!(v instanceof Boolean)) {
                throw new Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c." + option + " is "
                    + ClientChecks.typeName(v) + " " + ClientChecks.clip(v) + ", not a bool");
            }
            return (Boolean) v;
        }
    }

    static String join(Set<Long> rounds) {
        StringBuilder s = new StringBuilder();
        for (Long r : rounds) {
            s.append(s.length() == 0 ? "" : ", ").append(r);
        }
        return s.toString();
    }
}
