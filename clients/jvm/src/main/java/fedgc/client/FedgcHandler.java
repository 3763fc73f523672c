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

    /** A message the client refuses: the handler answers Flower's error reply with this one line. */
    public static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        public Refused(String message) {
            super(message);
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
        ConfigRecord config = content.get("config") instanceof ConfigRecord ? content.configRecord("config") : null;
        if (config == null) {
            throw new Refused("the training message has no 'config' record");
        }
        Settings settings = Settings.read(content.get("client-config") instanceof ConfigRecord
            ? content.configRecord("client-config") : null);
        long round = integer(config, "server-round", "config");
        double density = number(config, "density", "config");
        long numClients = integer(config, "num-clients", "config");
        Set<Long> applied = new HashSet<>();
        Object appliedValue = config.get("applied-rounds");
        if (appliedValue instanceof List) {
            for (Object r : (List<?>) appliedValue) {
                if (!(r instanceof Long)) {
                    throw new Refused("config 'applied-rounds' holds " + r + ", not an int");
                }
                applied.add((Long) r);
            }
        } else if (appliedValue != null) {
            throw new Refused("config 'applied-rounds' is not a list of int");
        }
        Dataset local = localData(context, settings);
        FedgcState st = state(context);

        // The model: a compressed download applied to the replica, a reset, or the plain model.
        LinkedHashMap<String, Tensor> model = download(content, config, st);

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

    /** The trainer for this run's model on the local data ({@link MlpTrainer}: {@code logreg}, {@code mlp}). */
    protected Trainer trainer(Dataset local, Settings settings) throws Refused {
        if (!"logreg".equals(settings.model) && !"mlp".equals(settings.model)) {
            throw new Refused("model " + settings.model + " has no trainer in the JVM client (logreg, mlp)");
        }
        return new MlpTrainer(local);
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
            throw new Refused(file + ": examples of shape " + Npy.shapeRepr(data.inputShape) + ", but the model takes "
                + Npy.shapeRepr(settings.inputShape));
        }
        if (data.n == 0) {
            throw new Refused(file + ": holds no examples");
        }
        for (int label : data.y) {
            if (label >= settings.numClasses) {
                throw new Refused(file + ": label " + label + " out of range for " + settings.numClasses + " classes");
            }
        }
        for (float v : data.x) {
            if (Float.isNaN(v) || Float.isInfinite(v)) {
                throw new Refused(file + ": x holds NaN or infinite values");
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
                throw new Refused("query.restore: record " + e.getKey() + " is not this client's state");
            }
            for (Map.Entry<String, Array> a : ((ArrayRecord) e.getValue()).entrySet()) {
                Tensor t;
                try {
                    t = Tensor.fromArray(a.getValue());
                } catch (RuntimeException err) {
                    throw new Refused("query.restore: " + e.getKey() + "/" + a.getKey() + ": " + err.getMessage());
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

    /** The {@code client-config} record (version 1), as far as this client implements it. */
    public static final class Settings {
        public String model, compressor;
        public long[] inputShape;
        public int numClasses, batchSize;
        public long seed;
        public Long localSteps;
        public double epochs, lr, momentum, weightDecay;
        public final Map<String, Object> options = new LinkedHashMap<>();

        static Settings read(ConfigRecord record) throws Refused {
            if (record == null) {
                throw new Refused("the training message has no 'client-config' record");
            }
            long version = integer(record, "version", "client-config");
            if (version != 1) {
                throw new Refused("client-config version " + version + "; this client speaks 1");
            }
            Settings s = new Settings();
            s.compressor = string(record, "compressor");
            List<String> known;
            if ("dgc".equals(s.compressor)) {
                known = DGC_OPTIONS;
            } else if ("topk".equals(s.compressor)) {
                known = TOPK_OPTIONS;
            } else {
                throw new Refused("compressor " + s.compressor + " is not implemented by the JVM client (dgc, topk)");
            }
            for (Map.Entry<String, Object> e : record.entrySet()) {
                if (e.getKey().startsWith("c.")) {
                    String option = e.getKey().substring(2);
                    if (!known.contains(option)) {
                        throw new Refused("client-config has option " + option + ", which " + s.compressor
                            + " in the JVM client does not read");
                    }
                    s.options.put(option, e.getValue());
                }
            }
            s.model = string(record, "model");
            Object shape = record.get("input-shape");
            if (!(shape instanceof List) || ((List<?>) shape).isEmpty()) {
                throw new Refused("client-config 'input-shape' is not a list of positive ints");
            }
            s.inputShape = new long[((List<?>) shape).size()];
            for (int i = 0; i < s.inputShape.length; i++) {
                Object d = ((List<?>) shape).get(i);
                if (!(d instanceof Long) || (Long) d <= 0) {
                    throw new Refused("client-config 'input-shape' is not a list of positive ints");
                }
                s.inputShape[i] = (Long) d;
            }
            s.numClasses = (int) positive(record, "num-classes");
            s.seed = integer(record, "seed", "client-config");
            boolean steps = record.containsKey("local-steps"), epochs = record.containsKey("epochs");
            if (steps == epochs) {
                throw new Refused("client-config needs exactly one of 'local-steps' and 'epochs'");
            }
            if (steps) {
                s.localSteps = positive(record, "local-steps");
            } else {
                s.epochs = number(record, "epochs", "client-config");
            }
            s.batchSize = (int) positive(record, "batch-size");
            s.lr = number(record, "lr", "client-config");
            s.momentum = number(record, "momentum", "client-config");
            s.weightDecay = number(record, "weight-decay", "client-config");
            s.compression(); // refuse bad option values now
            return s;
        }

        /** The compressor, its memory and the payload settings the options name. */
        ClientCompression compression() throws Refused {
            boolean dense = flag("dense_small_tensors", true);
            Object dtype = options.containsKey("value_dtype") ? options.get("value_dtype") : "fp32";
            int valueDtype;
            if ("fp32".equals(dtype)) {
                valueDtype = Payload.F32;
            } else if ("fp16".equals(dtype)) {
                valueDtype = Payload.F16;
            } else {
                throw new Refused("client-config c.value_dtype is " + dtype + ", not fp32 or fp16");
            }
            Compressor method;
            Memory memory;
            if ("dgc".equals(compressor)) {
                Object clip = options.get("clip_norm");
                if (clip != null && !(clip instanceof Double || clip instanceof Long)) {
                    throw new Refused("client-config c.clip_norm is not a number");
                }
                method = new Dgc(clip == null ? null : ((Number) clip).doubleValue());
                Object m = options.containsKey("momentum") ? options.get("momentum") : 0.9;
                if (!(m instanceof Double || m instanceof Long)) {
                    throw new Refused("client-config c.momentum is not a number");
                }
                DgcMemory dgc = new DgcMemory(((Number) m).doubleValue(), flag("nesterov", false),
                    flag("momentum_correction", true), flag("momentum_masking", true), dense);
                Object momentumDtype = options.containsKey("momentum_dtype") ? options.get("momentum_dtype") : "fp32";
                if (!"fp32".equals(momentumDtype) && !"bf16".equals(momentumDtype)) {
                    throw new Refused("client-config c.momentum_dtype is " + momentumDtype + ", not fp32 or bf16");
                }
                dgc.momentumBf16 = "bf16".equals(momentumDtype);
                Object ratio = options.get("sample_ratio"); // the JVM selects exactly (as sample_ratio 1.0)
                if (ratio != null && !(ratio instanceof Double || ratio instanceof Long)) {
                    throw new Refused("client-config c.sample_ratio is not a number");
                }
                memory = dgc;
            } else {
                method = new TopK();
                memory = flag("error_feedback", true) ? new ResidualMemory() : new NoMemory();
            }
            return new ClientCompression(method, memory, dense, valueDtype);
        }

        boolean flag(String option, boolean otherwise) throws Refused {
            Object v = options.get(option);
            if (v == null) {
                return otherwise;
            }
            if (!(v instanceof Boolean)) {
                throw new Refused("client-config c." + option + " is not a bool");
            }
            return (Boolean) v;
        }
    }

    static String string(ConfigRecord record, String key) throws Refused {
        Object v = record.get(key);
        if (!(v instanceof String)) {
            throw new Refused("client-config " + (v == null ? "has no '" + key + "'" : "'" + key + "' is not a str"));
        }
        return (String) v;
    }

    static long integer(ConfigRecord record, String key, String where) throws Refused {
        Object v = record.get(key);
        if (v instanceof BigInteger && ((BigInteger) v).bitLength() < 64) {
            return ((BigInteger) v).longValue();
        }
        if (!(v instanceof Long)) {
            throw new Refused(where + (v == null ? " has no '" + key + "'" : " '" + key + "' is not an int"));
        }
        return (Long) v;
    }

    static long positive(ConfigRecord record, String key) throws Refused {
        long v = integer(record, key, "client-config");
        if (v < 1 || v > Integer.MAX_VALUE) {
            throw new Refused("client-config '" + key + "' is " + v + ", not a positive int");
        }
        return v;
    }

    static double number(ConfigRecord record, String key, String where) throws Refused {
        Object v = record.get(key);
        if (!(v instanceof Double || v instanceof Long)) {
            throw new Refused(where + (v == null ? " has no '" + key + "'" : " '" + key + "' is not a number"));
        }
        double d = ((Number) v).doubleValue();
        if (Double.isNaN(d) || Double.isInfinite(d)) {
            throw new Refused(where + " '" + key + "' is not finite");
        }
        return d;
    }

    static String join(Set<Long> rounds) {
        StringBuilder s = new StringBuilder();
        for (Long r : rounds) {
            s.append(s.length() == 0 ? "" : ", ").append(r);
        }
        return s.toString();
    }
}
