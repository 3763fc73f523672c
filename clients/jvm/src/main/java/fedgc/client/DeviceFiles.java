package fedgc.client;

import fedgc.compress.Tensor;
import fedgc.supernode.Array;
import fedgc.supernode.ArrayRecord;
import fedgc.supernode.Log;
import fedgc.supernode.NodeContext;
import fedgc.supernode.Npy;
import fedgc.supernode.Record;
import fedgc.supernode.RecordDict;
import fedgc.train.Dataset;
import fedgc.supernode.Unsigned;
import java.io.File;
import java.io.IOException;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The node's files in {@code DATA_DIR} ({@code --data-dir}, else the node config's {@code data-dir}):
 * the client state {@code fedgc-state.npz} ({@link FedgcState}: memory, pending update, replica; loaded
 * once, kept per run, written atomically) and the device's training data {@code train.npz} (read once,
 * checked against the model). Also the state as Flower records, for {@code query.state} and
 * {@code query.restore}. One per {@link FedgcHandler}.
 */
final class DeviceFiles {
    private FedgcState state;
    private File stateFile;
    private Dataset data;
    private File dataFile;
    private long dataModified;

    /** {@code --data-dir}, else the node config's {@code data-dir}; refused when neither is set. */
    static File dataDir(NodeContext context) throws FedgcHandler.Refused {
        if (context.dataDir != null) {
            return context.dataDir;
        }
        Object dir = context.nodeConfig.get("data-dir");
        if (dir instanceof String && !((String) dir).isEmpty()) {
            return new File((String) dir);
        }
        throw new FedgcHandler.Refused("no device data: start the node with --data-dir DIR (or --node-config \"data-dir='DIR'\")");
    }

    /**
     * This node's state for the message's run: loaded from {@code DATA_DIR/fedgc-state.npz} the first
     * time; a state that belongs to another run (or to none) is set aside for an empty one, as Flower
     * gives each run a fresh {@code Context.state} (an old run's memory, pending update or replica must
     * not leak into a new run).
     */
    synchronized FedgcState state(NodeContext context) throws FedgcHandler.Refused, IOException {
        if (state == null) {
            File dir = dataDir(context);
            if (!dir.isDirectory()) {
                throw new FedgcHandler.Refused("data-dir " + dir + " is not a directory");
            }
            stateFile = new File(dir, FedgcState.FILE_NAME);
            try {
                state = FedgcState.load(stateFile);
            } catch (IOException e) {
                throw new FedgcHandler.Refused("cannot read the client state " + stateFile + ": " + e.getMessage());
            }
            if (stateFile.exists()) {
                Log.info("fedgc: state loaded from " + stateFile + " (run " + (state.runId == null ? "?" : Unsigned.toString(state.runId))
                    + ", " + state.memory.size() + " memory tensors, " + state.pending.size() + " pending, replica "
                    + (state.replica == null ? "none" : Downlink.digest(state.replica)) + ")");
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

    /** Writes {@code st} to {@code DATA_DIR/fedgc-state.npz} (atomically: {@link FedgcState#save}). */
    void save(FedgcState st) throws IOException {
        st.save(stateFile);
    }

    /**
     * {@code DATA_DIR/train.npz}, read once (again when the file changes) and checked against the
     * model's settings ({@code data-mismatch}: input shape, labels below {@code num-classes}, finite).
     */
    Dataset localData(NodeContext context, Settings settings) throws FedgcHandler.Refused {
        File file = new File(dataDir(context), FedgcHandler.TRAIN_FILE);
        if (!file.isFile()) {
            throw new FedgcHandler.Refused("no device data: " + file + " does not exist (expected an .npz of x and y)");
        }
        if (data == null || !file.equals(dataFile) || file.lastModified() != dataModified) {
            try {
                data = Dataset.loadNpz(file);
            } catch (IOException | RuntimeException e) {
                throw new FedgcHandler.Refused(file + ": not a readable .npz of x and y (" + e.getMessage() + ")");
            }
            dataFile = file;
            dataModified = file.lastModified();
        }
        if (!Arrays.equals(data.inputShape, settings.inputShape)) {
            throw new FedgcHandler.Refused(ClientChecks.DATA_MISMATCH, file + ": examples of shape " + Npy.shapeRepr(data.inputShape)
                + ", but the model takes "
                + Npy.shapeRepr(settings.inputShape));
        }
        if (data.n == 0) {
            throw new FedgcHandler.Refused(file + ": holds no examples");
        }
        for (int label : data.y) {
            if (label < 0 || label >= settings.numClasses) {
                throw new FedgcHandler.Refused(ClientChecks.DATA_MISMATCH, file + ": label " + label + " out of range for "
                    + settings.numClasses + " classes");
            }
        }
        for (float v : data.x) {
            if (Float.isNaN(v) || Float.isInfinite(v)) {
                throw new FedgcHandler.Refused(ClientChecks.DATA_MISMATCH, file + ": x holds NaN or infinite values");
            }
        }
        return data;
    }

    /** The state as {@code query.state} answers it: ArrayRecords {@code jvm.memory}, {@code jvm.pending}, {@code jvm.replica}. */
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
        out.put(FedgcHandler.MEMORY_RECORD, memory);
        out.put(FedgcHandler.PENDING_RECORD, pending);
        if (st.replica != null) {
            ArrayRecord replica = new ArrayRecord();
            for (Map.Entry<String, Tensor> e : st.replica.entrySet()) {
                replica.put(e.getKey(), e.getValue().toArray());
            }
            out.put(FedgcHandler.REPLICA_RECORD, replica);
        }
        return out;
    }

    /**
     * {@code query.restore}: the state the records hold ({@link #stateRecords}' form; any other record,
     * or an array that is not a float32 {@code .npy} with a bounded header, is refused: {@code bad-state})
     * becomes this node's state for the run, and is written to the state file.
     */
    FedgcState restore(RecordDict content, NodeContext context) throws FedgcHandler.Refused, IOException {
        state(context);
        FedgcState st = new FedgcState();
        st.runId = context.runId;
        for (Map.Entry<String, Record> e : content.entrySet()) {
            if (!(e.getValue() instanceof ArrayRecord) || !(FedgcHandler.MEMORY_RECORD.equals(e.getKey())
                    || FedgcHandler.PENDING_RECORD.equals(e.getKey()) || FedgcHandler.REPLICA_RECORD.equals(e.getKey()))) {
                throw new FedgcHandler.Refused(ClientChecks.BAD_STATE, "query.restore: record " + ClientChecks.clip(e.getKey())
                    + " is not this client's state");
            }
            for (Map.Entry<String, Array> a : ((ArrayRecord) e.getValue()).entrySet()) {
                Tensor t;
                try {
                    Npy.header(a.getValue().data, ClientChecks.NPY_HEADER_MAX); // bounded, before anything is decoded
                    t = Tensor.fromArray(a.getValue());
                } catch (RuntimeException err) {
                    throw new FedgcHandler.Refused(ClientChecks.BAD_STATE, "query.restore: " + e.getKey() + "/"
                        + ClientChecks.clip(a.getKey()) + ": " + ClientChecks.clip(err.getMessage()));
                }
                if (FedgcHandler.MEMORY_RECORD.equals(e.getKey())) {
                    st.memory.put(a.getKey(), t.data);
                } else if (FedgcHandler.PENDING_RECORD.equals(e.getKey())) {
                    st.pending.put(a.getKey(), t.data);
                } else {
                    if (st.replica == null) {
                        st.replica = new LinkedHashMap<>();
                    }
                    st.replica.put(a.getKey(), t);
                }
            }
        }
        synchronized (this) {
            state = st;
        }
        save(st);
        Log.info("fedgc: state restored (" + st.memory.size() + " memory tensors, " + st.pending.size() + " pending)");
        return st;
    }
}
