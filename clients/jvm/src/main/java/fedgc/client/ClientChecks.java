package fedgc.client;

import fedgc.supernode.Array;
import fedgc.supernode.ArrayRecord;
import fedgc.supernode.ConfigRecord;
import fedgc.supernode.Json;
import fedgc.supernode.Npy;
import fedgc.supernode.Record;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What fedgc's JVM client checks in a train message before it does any work, by the rules of
 * docs/client-protocol.md ("What a client refuses") that fedgc's Python client applies
 * ({@code fedgc/flower/client_checks.py}, {@code client_config.py}): the node's own limits
 * ({@link NodeLimits}, from its {@code --node-config}), the {@code config} record
 * ({@link #roundConfig}), the model's size before anything is built ({@link ModelSpec}) and the
 * global model's arrays, on their {@code .npy} headers, before a byte of them is decoded
 * ({@link #checkArrays}). A refusal is a {@link FedgcHandler.Refused} whose message is
 * {@code "<reason>: <detail>"} with a reason from the protocol's table.
 */
public final class ClientChecks {
    private ClientChecks() {}

    public static final String BAD_CLIENT_CONFIG = "bad-client-config", UNKNOWN_MODEL = "unknown-model",
        TOO_LARGE = "too-large", BAD_CONFIG = "bad-config", BAD_ARRAYS = "bad-arrays", BAD_STATE = "bad-state",
        DATA_MISMATCH = "data-mismatch", BAD_NODE_CONFIG = "bad-node-config";
    /** The longest {@code .npy} header a model tensor may have (numpy writes ~128 bytes). */
    public static final int NPY_HEADER_MAX = 4096;
    public static final int MAX_MODEL_OPTIONS_CHARS = 65_536, MAX_MODEL_OPTIONS_DEPTH = 32;
    public static final int MAX_INPUT_DIMS = 4, MAX_INPUT_SIDE = 65_536, MAX_INPUT_ELEMENTS = 1 << 24;
    public static final int MAX_CLASSES = 1 << 20, MAX_HIDDEN_LAYERS = 64;
    static final String ELLIPSIS = "\u2026";

    /**
     * The most a train message may ask of this node; the operator sets them with
     * {@code --node-config "max-local-steps=N max-epochs=X max-batch-size=N max-parameters=N"} (the
     * defaults are Python's: 100,000 steps, 1,000 epochs, 65,536 examples a batch, 2^28 parameters;
     * the JVM trainer counts steps and batches in {@code int}s, so a larger limit counts as 2^31 − 1).
     */
    public static final class NodeLimits {
        public static final NodeLimits DEFAULT = new NodeLimits(100_000, 1_000.0, 65_536, 1L << 28, 10_000);

        public final long maxLocalSteps;
        public final double maxEpochs;
        public final long maxBatchSize;
        public final long maxParameters;
        public final int maxAppliedRounds;

        public NodeLimits(long maxLocalSteps, double maxEpochs, long maxBatchSize, long maxParameters,
                          int maxAppliedRounds) {
            this.maxLocalSteps = Math.min(maxLocalSteps, Integer.MAX_VALUE);
            this.maxEpochs = maxEpochs;
            this.maxBatchSize = Math.min(maxBatchSize, Integer.MAX_VALUE);
            this.maxParameters = maxParameters;
            this.maxAppliedRounds = maxAppliedRounds;
        }

        /** The limits a node config sets (the others: {@link #DEFAULT}'s); {@code bad-node-config} when one is not a positive number. */
        public static NodeLimits fromNodeConfig(Map<String, Object> nodeConfig) throws FedgcHandler.Refused {
            return new NodeLimits(
                (long) limit(nodeConfig, "max-local-steps", DEFAULT.maxLocalSteps, true),
                limit(nodeConfig, "max-epochs", DEFAULT.maxEpochs, false),
                (long) limit(nodeConfig, "max-batch-size", DEFAULT.maxBatchSize, true),
                (long) limit(nodeConfig, "max-parameters", DEFAULT.maxParameters, true),
                DEFAULT.maxAppliedRounds);
        }

        private static double limit(Map<String, Object> nodeConfig, String key, double otherwise, boolean integral)
                throws FedgcHandler.Refused {
            if (nodeConfig == null || !nodeConfig.containsKey(key)) {
                return otherwise;
            }
            Object v = nodeConfig.get(key);
            double value;
            if (v instanceof Number) {
                value = ((Number) v).doubleValue();
            } else if (v instanceof String) {
                try {
                    value = Double.parseDouble(((String) v).trim());
                } catch (NumberFormatException e) {
                    throw new FedgcHandler.Refused(BAD_NODE_CONFIG, key + "=" + clip(v) + " is not a number");
                }
            } else {
                throw new FedgcHandler.Refused(BAD_NODE_CONFIG, key + "=" + clip(v) + " is not a number");
            }
            if (integral) {
                value = value < 0 ? Math.ceil(value) : Math.floor(value); // as Python's int() truncates
            }
            if (Double.isNaN(value) || Double.isInfinite(value) || value <= 0) {
                throw new FedgcHandler.Refused(BAD_NODE_CONFIG, key + "=" + clip(v) + " is not a positive number");
            }
            return value;
        }
    }

    /** The {@code config} record's values, each in range. */
    public static final class RoundConfig {
        public final long serverRound;
        public final double density;
        public final long numClients;
        public final Set<Long> appliedRounds;

        RoundConfig(long serverRound, double density, long numClients, Set<Long> appliedRounds) {
            this.serverRound = serverRound;
            this.density = density;
            this.numClients = numClients;
            this.appliedRounds = Collections.unmodifiableSet(appliedRounds);
        }
    }

    /**
     * The per-round {@code config} record ({@code bad-config}): {@code server-round} an int in
     * 1…2^31−1, {@code density} a finite number in (0, 1], {@code num-clients} an int in 1…2^31−1,
     * {@code applied-rounds} (absent: none) a list of at most the node's {@code maxAppliedRounds} ints
     * in 1…{@code server-round}.
     */
    public static RoundConfig roundConfig(Record record, NodeLimits limits) throws FedgcHandler.Refused {
        if (!(record instanceof ConfigRecord)) {
            throw new FedgcHandler.Refused(BAD_CONFIG, "the train message has no 'config' record");
        }
        ConfigRecord config = (ConfigRecord) record;
        long round = integer(config, "server-round", 1, Integer.MAX_VALUE, BAD_CONFIG);
        double density = number(config, "density", 0.0, 1.0, true, false, BAD_CONFIG);
        long numClients = integer(config, "num-clients", 1, Integer.MAX_VALUE, BAD_CONFIG);
        Set<Long> applied = new HashSet<>();
        if (config.containsKey("applied-rounds")) {
            Object value = config.get("applied-rounds");
            boolean ok = value instanceof List && ((List<?>) value).size() <= limits.maxAppliedRounds;
            for (Object r : ok ? (List<?>) value : Collections.emptyList()) {
                Long v = asInt(r);
                ok = ok && v != null && v >= 1 && v <= round;
                if (!ok) {
                    break;
                }
                applied.add(v);
            }
            if (!ok) {
                throw new FedgcHandler.Refused(BAD_CONFIG, "applied-rounds is not a list of at most "
                    + limits.maxAppliedRounds + " rounds in 1" + ELLIPSIS + round);
            }
        }
        return new RoundConfig(round, density, numClients, applied);
    }

    /**
     * The tensors of a JVM model ({@code logreg}, {@code mlp}, {@code mnist_2nn}: Flatten, then
     * Linear layers {@code net.1}, {@code net.3}, … as PyTorch's state_dict names them), in order,
     * from the input shape, the classes and the hidden widths; its parameter count is known before
     * anything is allocated.
     */
    public static final class ModelSpec {
        public final List<String> names;
        public final List<long[]> shapes;
        /** The parameter count (a double: exact up to 2^53, and any larger model is refused anyway). */
        public final double parameters;

        /** The tensors as given (a model of a subclass's own trainer: as its arrays declare them). */
        ModelSpec(List<String> names, List<long[]> shapes) {
            this.names = Collections.unmodifiableList(new ArrayList<>(names));
            this.shapes = Collections.unmodifiableList(new ArrayList<>(shapes));
            double count = 0;
            for (long[] shape : shapes) {
                double n = 1;
                for (long d : shape) {
                    n *= d;
                }
                count += n;
            }
            this.parameters = count;
        }

        ModelSpec(long[] inputShape, long numClasses, long[] hidden) {
            List<String> n = new ArrayList<>();
            List<long[]> s = new ArrayList<>();
            long fanIn = 1;
            for (long d : inputShape) {
                fanIn *= d; // at most 2^24 (checked before)
            }
            double count = 0;
            long[] widths = Arrays.copyOf(hidden, hidden.length + 1);
            widths[hidden.length] = numClasses;
            for (int i = 0; i < widths.length; i++) {
                String layer = "net." + (1 + 2 * i);
                n.add(layer + ".weight");
                s.add(new long[] {widths[i], fanIn});
                n.add(layer + ".bias");
                s.add(new long[] {widths[i]});
                count += ((double) fanIn + 1) * widths[i];
                fanIn = widths[i];
            }
            this.names = Collections.unmodifiableList(n);
            this.shapes = Collections.unmodifiableList(s);
            this.parameters = count;
        }
    }

    /** The hidden widths of the models the JVM client has; null for a model it does not have. */
    static long[] defaultHidden(String model) {
        if ("logreg".equals(model)) {
            return new long[0];
        }
        if ("mlp".equals(model)) {
            return new long[] {128};
        }
        if ("mnist_2nn".equals(model)) {
            return new long[] {200, 200};
        }
        return null;
    }

    /**
     * {@code model-options} ({@code bad-client-config}): absent (an empty map), or a JSON object of at
     * most 64 Ki characters, nested at most 32 deep, of what the client's JSON reader takes (objects,
     * lists, strings, ints, bools).
     */
    static Map<String, Object> modelOptions(ConfigRecord record) throws FedgcHandler.Refused {
        if (!record.containsKey("model-options")) {
            return Collections.emptyMap();
        }
        Object value = record.get("model-options");
        if (!(value instanceof String)) {
            throw new FedgcHandler.Refused(BAD_CLIENT_CONFIG, "client-config 'model-options' is " + typeName(value)
                + ", not str");
        }
        String text = (String) value;
        if (text.length() > MAX_MODEL_OPTIONS_CHARS) {
            throw new FedgcHandler.Refused(BAD_CLIENT_CONFIG, "client-config 'model-options' is " + text.length()
                + " characters, more than " + MAX_MODEL_OPTIONS_CHARS);
        }
        Object options = null;
        if (depth(text) <= MAX_MODEL_OPTIONS_DEPTH) {
            try {
                options = Json.parse(text);
            } catch (RuntimeException e) {
                options = null;
            }
        }
        if (!(options instanceof Map)) {
            throw new FedgcHandler.Refused(BAD_CLIENT_CONFIG, "client-config 'model-options' is not a JSON object "
                + "(of ints, strings and bools, nested at most " + MAX_MODEL_OPTIONS_DEPTH + " deep)");
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> map = (Map<String, Object>) options;
        return Collections.unmodifiableMap(map);
    }

    /**
     * The hidden widths of a built-in model from its options ({@code bad-client-config}): {@code mlp}
     * takes {@code hidden}, a list of at most 64 ints ≥ 1 (default [128]); {@code logreg} and
     * {@code mnist_2nn} take no option.
     */
    static long[] hiddenWidths(Map<String, Object> options, String model) throws FedgcHandler.Refused {
        long[] hidden = defaultHidden(model);
        for (Map.Entry<String, Object> e : options.entrySet()) {
            if (!"mlp".equals(model) || !"hidden".equals(e.getKey())) {
                throw new FedgcHandler.Refused(BAD_CLIENT_CONFIG, "client-config 'model-options': options."
                    + clip(e.getKey()) + ": unknown key (model " + model + ")");
            }
            Object widths = e.getValue();
            boolean ok = widths instanceof List && ((List<?>) widths).size() <= MAX_HIDDEN_LAYERS;
            List<?> list = ok ? (List<?>) widths : Collections.emptyList();
            hidden = new long[list.size()];
            for (int i = 0; ok && i < hidden.length; i++) {
                Long w = asInt(list.get(i));
                ok = w != null && w >= 1;
                hidden[i] = ok ? w : 0;
            }
            if (!ok) {
                throw new FedgcHandler.Refused(BAD_CLIENT_CONFIG, "client-config 'model-options': options.hidden is "
                    + "not a list of at most " + MAX_HIDDEN_LAYERS + " ints >= 1 (model mlp)");
            }
        }
        return hidden;
    }

    /** The deepest nesting of JSON arrays and objects in {@code text} (strings skipped), without parsing it. */
    static int depth(String text) {
        int depth = 0, deepest = 0;
        boolean inString = false;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (inString) {
                if (c == '\\') {
                    i++;
                } else if (c == '"') {
                    inString = false;
                }
            } else if (c == '"') {
                inString = true;
            } else if (c == '[' || c == '{') {
                deepest = Math.max(deepest, ++depth);
            } else if (c == ']' || c == '}') {
                depth--;
            }
        }
        return deepest;
    }

    /**
     * The global model's arrays ({@code bad-arrays}): exactly the model's tensors, in order, each
     * {@code float32} of its shape with {@code stype} {@code numpy.ndarray}, and a {@code .npy} file
     * (header at most 4 KiB) that declares exactly that and holds exactly that many bytes — all read
     * off the headers, before anything is decoded.
     */
    public static void checkArrays(Record record, ModelSpec spec) throws FedgcHandler.Refused {
        if (!(record instanceof ArrayRecord)) {
            throw new FedgcHandler.Refused(BAD_ARRAYS, "the train message has no 'arrays' record");
        }
        ArrayRecord arrays = (ArrayRecord) record;
        List<String> names = new ArrayList<>(arrays.keySet());
        if (!names.equals(spec.names)) {
            throw new FedgcHandler.Refused(BAD_ARRAYS, "the model's arrays do not fit the model: "
                + describeNames(names, spec.names));
        }
        for (int i = 0; i < names.size(); i++) {
            String name = names.get(i);
            Array a = arrays.get(name);
            long[] shape = spec.shapes.get(i);
            if (!"float32".equals(a.dtype) || !Arrays.equals(a.shape, shape) || !Array.STYPE_NUMPY.equals(a.stype)) {
                throw new FedgcHandler.Refused(BAD_ARRAYS, name + " is " + clip(a.dtype) + " " + Npy.shapeRepr(a.shape)
                    + " (" + clip(a.stype) + "), the model's is float32 " + Npy.shapeRepr(shape));
            }
            Npy.Header header;
            try {
                header = Npy.header(a.data, NPY_HEADER_MAX);
            } catch (RuntimeException e) {
                throw new FedgcHandler.Refused(BAD_ARRAYS, name + "'s data is not a .npy file with a header of at most "
                    + NPY_HEADER_MAX + " bytes");
            }
            long expected = Npy.count(shape) * 4;
            if (!"float32".equals(header.dtype) || !Arrays.equals(header.shape, shape)
                    || a.data.length - (long) header.offset != expected) {
                throw new FedgcHandler.Refused(BAD_ARRAYS, name + "'s .npy data declares " + header.dtype + " "
                    + Npy.shapeRepr(header.shape) + " in " + (a.data.length - header.offset) + " bytes, not float32 "
                    + Npy.shapeRepr(shape) + " in " + expected);
            }
        }
    }

    /**
     * The tensors a message's arrays declare, for a model the client cannot size itself (one of a
     * subclass's trainer): {@code bad-arrays} without an {@code arrays} record or with a negative
     * dimension, {@code too-large} when they declare more than the node's {@code max-parameters}.
     */
    static ModelSpec declaredSpec(Record record, NodeLimits limits) throws FedgcHandler.Refused {
        if (!(record instanceof ArrayRecord)) {
            throw new FedgcHandler.Refused(BAD_ARRAYS, "the train message has no 'arrays' record");
        }
        List<String> names = new ArrayList<>();
        List<long[]> shapes = new ArrayList<>();
        for (Map.Entry<String, Array> e : ((ArrayRecord) record).entrySet()) {
            for (long d : e.getValue().shape) {
                if (d < 0) {
                    throw new FedgcHandler.Refused(BAD_ARRAYS, clip(e.getKey()) + " has shape "
                        + Npy.shapeRepr(e.getValue().shape));
                }
            }
            names.add(e.getKey());
            shapes.add(e.getValue().shape);
        }
        ModelSpec spec = new ModelSpec(names, shapes);
        if (spec.parameters > limits.maxParameters) {
            throw new FedgcHandler.Refused(TOO_LARGE, "the model's arrays declare " + String.format("%.0f", spec.parameters)
                + " parameters, more than this node's " + limits.maxParameters);
        }
        return spec;
    }

    /** The tensors of a model held (names and shapes). */
    static ModelSpec specOf(Map<String, fedgc.compress.Tensor> model) {
        List<long[]> shapes = new ArrayList<>();
        for (fedgc.compress.Tensor t : model.values()) {
            shapes.add(t.shape);
        }
        return new ModelSpec(new ArrayList<>(model.keySet()), shapes);
    }

    /** A model rebuilt from a compressed download: the model's tensors, in order, of its shapes ({@code bad-arrays}). */
    static void checkModel(Map<String, fedgc.compress.Tensor> model, ModelSpec spec) throws FedgcHandler.Refused {
        List<String> names = new ArrayList<>(model.keySet());
        boolean ok = names.equals(spec.names);
        for (int i = 0; ok && i < names.size(); i++) {
            ok = Arrays.equals(model.get(names.get(i)).shape, spec.shapes.get(i));
        }
        if (!ok) {
            throw new FedgcHandler.Refused(BAD_ARRAYS, "the downloaded model does not fit the model the client-config names");
        }
    }

    /** The memory keys the JVM's compressors keep: {@code <prefix><parameter>}. */
    static final List<String> MEMORY_PREFIXES = Collections.unmodifiableList(
        Arrays.asList("dgc_momentum/", "dgc_velocity/", "residual/"));

    /**
     * The node's stored state ({@code bad-state}), before it is used: every memory tensor a DGC
     * momentum or velocity or a residual of one of the model's parameters, with as many entries; every
     * pending update named {@code <round>/<parameter>} of one of them, with as many entries; nothing
     * NaN or infinite.
     */
    static void checkState(Map<String, float[]> memory, Map<String, float[]> pending, ModelSpec spec)
            throws FedgcHandler.Refused {
        for (Map.Entry<String, float[]> e : memory.entrySet()) {
            String key = e.getKey(), parameter = null;
            for (String prefix : MEMORY_PREFIXES) {
                parameter = key.startsWith(prefix) ? key.substring(prefix.length()) : parameter;
            }
            checkStateTensor("memory", key, parameter, e.getValue(), spec);
        }
        for (Map.Entry<String, float[]> e : pending.entrySet()) {
            String key = e.getKey();
            int slash = key.indexOf('/');
            boolean round = slash > 0 && slash <= 10;
            for (int i = 0; round && i < slash; i++) {
                round = Character.isDigit(key.charAt(i)) && key.charAt(i) < 128;
            }
            checkStateTensor("pending update", key, round ? key.substring(slash + 1) : null, e.getValue(), spec);
        }
    }

    private static void checkStateTensor(String what, String key, String parameter, float[] values, ModelSpec spec)
            throws FedgcHandler.Refused {
        int i = parameter == null ? -1 : spec.names.indexOf(parameter);
        if (i < 0) {
            throw new FedgcHandler.Refused(BAD_STATE, "the restored " + what + " '" + clip(key) + "' names no "
                + ("memory".equals(what) ? "memory slot of a parameter" : "round and parameter") + " of the model");
        }
        long expected = Npy.count(spec.shapes.get(i));
        if (values.length != expected) {
            throw new FedgcHandler.Refused(BAD_STATE, "the restored " + what + " '" + clip(key) + "' has "
                + values.length + " entries, its parameter " + expected);
        }
        for (float v : values) {
            if (Float.isNaN(v) || Float.isInfinite(v)) {
                throw new FedgcHandler.Refused(BAD_STATE, "the restored " + what + " '" + clip(key)
                    + "' holds NaN or infinity");
            }
        }
    }

    private static String describeNames(List<String> names, List<String> expected) {
        for (String name : expected) {
            if (!names.contains(name)) {
                return "no '" + name + "'";
            }
        }
        for (String name : names) {
            if (!expected.contains(name)) {
                return "an unknown '" + clip(name) + "'";
            }
        }
        return "tensors out of order";
    }

    // ------------------------------------------------------------------ typed values

    /** An int value (Long, Integer, or a BigInteger that fits a long); null for anything else (a bool, a float, a string). */
    static Long asInt(Object v) {
        if (v instanceof Long) {
            return (Long) v;
        }
        if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        if (v instanceof BigInteger) {
            BigInteger b = (BigInteger) v;
            return b.bitLength() < 64 ? b.longValue() : (b.signum() > 0 ? Long.MAX_VALUE : Long.MIN_VALUE);
        }
        return null;
    }

    /** A number (an int or a float; never a bool or a string), null otherwise. */
    static Double asNumber(Object v) {
        if (v instanceof Boolean || !(v instanceof Number)) {
            return null;
        }
        return ((Number) v).doubleValue();
    }

    /** An int in low…high, else a refusal with {@code reason}. */
    static long integer(ConfigRecord record, String key, long low, long high, String reason) throws FedgcHandler.Refused {
        Object v = record.get(key);
        Long value = asInt(v);
        if (value == null || value < low || value > high) {
            throw new FedgcHandler.Refused(reason, where(reason) + "'" + key + "' is " + describe(record, key)
                + ", not an int in " + low + ELLIPSIS + high);
        }
        return value;
    }

    /** A finite number in the interval (open at either end as asked), else a refusal with {@code reason}. */
    static double number(ConfigRecord record, String key, double low, double high, boolean lowOpen, boolean highOpen,
                         String reason) throws FedgcHandler.Refused {
        Double value = asNumber(record.get(key));
        boolean inside = value != null && !Double.isNaN(value) && !Double.isInfinite(value)
            && (lowOpen ? low < value : low <= value) && (highOpen ? value < high : value <= high);
        if (!inside) {
            throw new FedgcHandler.Refused(reason, where(reason) + "'" + key + "' is " + describe(record, key)
                + ", not a finite number in " + (lowOpen ? "(" : "[") + fmt(low) + ", " + fmt(high) + (highOpen ? ")" : "]"));
        }
        return value;
    }

    /** A string, else {@code bad-client-config}. */
    static String string(ConfigRecord record, String key) throws FedgcHandler.Refused {
        Object v = record.get(key);
        if (!(v instanceof String)) {
            throw new FedgcHandler.Refused(BAD_CLIENT_CONFIG, "client-config '" + key + "' is " + describe(record, key)
                + ", not str");
        }
        return (String) v;
    }

    static String where(String reason) {
        return BAD_CONFIG.equals(reason) ? "config " : "client-config ";
    }

    static String describe(ConfigRecord record, String key) {
        Object v = record.get(key);
        if (!record.containsKey(key)) {
            return "missing";
        }
        return v instanceof List ? "a list of " + ((List<?>) v).size() : typeName(v) + " " + clip(v);
    }

    static String typeName(Object v) {
        if (v instanceof Boolean) {
            return "bool";
        }
        if (asInt(v) != null) {
            return "int";
        }
        if (v instanceof Number) {
            return "float";
        }
        if (v instanceof String) {
            return "str";
        }
        if (v instanceof List) {
            return "list";
        }
        return v == null ? "None" : "bytes";
    }

    /** At most 60 characters of a value's text (a refusal's line stays short whatever the message holds). */
    static String clip(Object v) {
        String s = v instanceof List ? "list of " + ((List<?>) v).size() : String.valueOf(v);
        s = s.replace('\n', ' ').replace('\r', ' ');
        return s.length() > 60 ? s.substring(0, 60) + ELLIPSIS : s;
    }

    private static String fmt(double d) {
        return d == Math.rint(d) && Math.abs(d) < 1e15 ? String.valueOf((long) d) : String.valueOf(d);
    }
}
