package fedgc.client;

import fedgc.compress.ClientCompression;
import fedgc.compress.Compressor;
import fedgc.compress.Dgc;
import fedgc.compress.DgcMemory;
import fedgc.compress.Memory;
import fedgc.compress.NoMemory;
import fedgc.compress.ResidualMemory;
import fedgc.compress.TopK;
import fedgc.supernode.ConfigRecord;
import fedgc.supernode.Npy;
import fedgc.supernode.Record;
import fedgc.wire.Quantize;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The {@code client-config} record (version 1), every field checked by the rules of
 * docs/client-protocol.md ("What a client refuses", as fedgc's Python client's
 * {@code read_client_config}) and the node's limits, as far as this client implements it: types
 * strict (an int for a float is fine, a bool or a string never), ranges as in the table,
 * compressors {@code dgc} and {@code topk} with their options' own ranges, models {@code logreg},
 * {@code mlp} and {@code mnist_2nn} (any other: {@code unknown-model}), sized before anything is
 * built ({@code too-large}).
 */
public final class Settings {
    static final List<String> DGC_OPTIONS = Arrays.asList("value_dtype", "dense_small_tensors", "momentum", "nesterov",
        "momentum_correction", "momentum_masking", "clip_norm", "momentum_dtype", "sample_ratio");
    static final List<String> TOPK_OPTIONS = Arrays.asList("value_dtype", "dense_small_tensors", "error_feedback");

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

    static Settings read(ConfigRecord record) throws FedgcHandler.Refused {
        return read(record, ClientChecks.NodeLimits.DEFAULT, java.util.Collections.<String>emptySet());
    }

    static Settings read(Record given, ClientChecks.NodeLimits limits, Set<String> otherModels) throws FedgcHandler.Refused {
        if (!(given instanceof ConfigRecord)) {
            throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "the training message has no 'client-config' record");
        }
        ConfigRecord record = (ConfigRecord) given;
        Long version = ClientChecks.asInt(record.get("version"));
        if (version == null || version != 1) {
            throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config version "
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
            throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "compressor " + ClientChecks.clip(s.compressor)
                + " is not implemented by the JVM client (dgc, topk)");
        }
        for (Map.Entry<String, Object> e : record.entrySet()) {
            if (e.getKey().startsWith("c.")) {
                String option = e.getKey().substring(2);
                if (!known.contains(option)) {
                    throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config has option "
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
            throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config needs exactly one of 'local-steps' and 'epochs'");
        }
        s.model = ClientChecks.string(record, "model");
        boolean builtIn = ClientChecks.defaultHidden(s.model) != null;
        if (!builtIn && !otherModels.contains(s.model)) {
            throw new FedgcHandler.Refused(ClientChecks.UNKNOWN_MODEL, "client-config names a model this node does not have: "
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
            throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config 'input-shape' is "
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
            throw new FedgcHandler.Refused(ClientChecks.TOO_LARGE, "model " + s.model + " for input " + Npy.shapeRepr(s.inputShape)
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
    ClientCompression compression() throws FedgcHandler.Refused {
        boolean dense = flag("dense_small_tensors", true);
        Object dtype = options.containsKey("value_dtype") ? options.get("value_dtype") : "fp32";
        int valueDtype = -1; // the encoding's code: fp32, fp16 (blob version 1); int8, int4, sign (v3)
        for (int code = 0; code < Quantize.ENCODINGS.length; code++) {
            if (Quantize.ENCODINGS[code].equals(dtype)) {
                valueDtype = code;
            }
        }
        if (valueDtype < 0) {
            throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c.value_dtype is "
                + ClientChecks.clip(dtype) + ", not fp32, fp16, int8, int4 or sign");
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
                throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c.momentum_dtype is "
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
            throws FedgcHandler.Refused {
        if (!options.containsKey(option)) {
            return otherwise;
        }
        Double v = ClientChecks.asNumber(options.get(option));
        boolean inside = v != null && !Double.isNaN(v) && !Double.isInfinite(v)
            && (lowOpen ? low < v : low <= v) && (highOpen ? v < high : v <= high);
        if (!inside) {
            throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c." + option + " is "
                + ClientChecks.typeName(options.get(option)) + " " + ClientChecks.clip(options.get(option))
                + ", not a finite number in " + (lowOpen ? "(" : "[") + low + ", "
                + (high == Double.MAX_VALUE ? "inf" : String.valueOf(high)) + (highOpen ? ")" : "]"));
        }
        return v;
    }

    boolean flag(String option, boolean otherwise) throws FedgcHandler.Refused {
        if (!options.containsKey(option)) {
            return otherwise;
        }
        Object v = options.get(option);
        if (!(v instanceof Boolean)) {
            throw new FedgcHandler.Refused(ClientChecks.BAD_CLIENT_CONFIG, "client-config c." + option + " is "
                + ClientChecks.typeName(v) + " " + ClientChecks.clip(v) + ", not a bool");
        }
        return (Boolean) v;
    }
}
