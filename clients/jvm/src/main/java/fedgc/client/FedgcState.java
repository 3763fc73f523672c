package fedgc.client;

import fedgc.supernode.Npy;

import fedgc.supernode.Unsigned;
import fedgc.compress.Tensor;
import fedgc.train.Dataset;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/**
 * What a fedgc client keeps between messages (fedgc's Python client keeps it in Flower's
 * {@code context.state}): the compression memory ({@code residual/NAME}, {@code dgc_momentum/NAME},
 * {@code dgc_velocity/NAME}), the update sent but not yet confirmed ({@code ROUND/NAME}, dense) and
 * the downlink replica (the model this client holds, with its shapes; null: none yet), and the run
 * they belong to (Flower keeps a client's state per run; so does this client).
 *
 * <p>On the device it lives in one file, {@code DATA_DIR/fedgc-state.npz}: a numpy {@code .npz}
 * (stored zip) of float32 arrays named {@code memory/KEY}, {@code pending/ROUND/NAME} (1-D) and
 * {@code replica/NAME} (the tensor's shape), and an empty array {@code run/RUN_ID} (the run id,
 * unsigned decimal), readable with {@code np.load}. {@link #save} writes a
 * temporary file, syncs it and renames it over the old one, so a process killed at any moment leaves
 * either the old state or the new one.
 */
public final class FedgcState {
    public static final String FILE_NAME = "fedgc-state.npz";
    static final String MEMORY = "memory/", PENDING = "pending/", REPLICA = "replica/", RUN = "run/";

    /** The run this state belongs to (Flower's run id, unsigned), or null when unknown. */
    public Long runId;

    public final LinkedHashMap<String, float[]> memory = new LinkedHashMap<>();
    public final LinkedHashMap<String, float[]> pending = new LinkedHashMap<>();
    /** The downlink replica in the model's order, or null when this client holds none. */
    public LinkedHashMap<String, Tensor> replica;

    /** The state in {@code file}; an empty state when the file does not exist. */
    public static FedgcState load(File file) throws IOException {
        FedgcState state = new FedgcState();
        if (!file.exists()) {
            return state;
        }
        InputStream in = new FileInputStream(file);
        try {
            state.read(in, file.getPath());
        } finally {
            in.close();
        }
        return state;
    }

    /** Replace this state by the one in {@code bytes} (as {@link #toBytes} writes it). */
    public static FedgcState fromBytes(byte[] bytes, String where) throws IOException {
        FedgcState state = new FedgcState();
        state.read(new ByteArrayInputStream(bytes), where);
        return state;
    }

    private void read(InputStream in, String where) throws IOException {
        Map<String, Npy.Decoded> arrays = Dataset.readNpz(in);
        for (Map.Entry<String, Npy.Decoded> e : arrays.entrySet()) {
            String key = e.getKey();
            Npy.Decoded a = e.getValue();
            if (!"float32".equals(a.dtype)) {
                throw new IOException(where + ": " + key + " is " + a.dtype + ", not float32");
            }
            float[] values = new float[a.raw.length / 4];
            ByteBuffer.wrap(a.raw).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(values);
            if (key.startsWith(MEMORY)) {
                memory.put(key.substring(MEMORY.length()), values);
            } else if (key.startsWith(PENDING)) {
                pending.put(key.substring(PENDING.length()), values);
            } else if (key.startsWith(RUN) && values.length == 0) {
                try {
                    runId = Unsigned.parse(key.substring(RUN.length()));
                } catch (NumberFormatException err) {
                    throw new IOException(where + ": bad run entry " + key);
                }
            } else if (key.startsWith(REPLICA)) {
                if (replica == null) {
                    replica = new LinkedHashMap<>();
                }
                replica.put(key.substring(REPLICA.length()), new Tensor(a.shape, values));
            } else {
                throw new IOException(where + ": unknown entry " + key);
            }
        }
    }

    /** The state as an {@code .npz} (stored, not deflated). */
    public byte[] toBytes() throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        ZipOutputStream zip = new ZipOutputStream(bytes);
        if (runId != null) {
            entry(zip, RUN + Unsigned.toString(runId), new float[0], new long[] {0});
        }
        for (Map.Entry<String, float[]> e : memory.entrySet()) {
            entry(zip, MEMORY + e.getKey(), e.getValue(), new long[] {e.getValue().length});
        }
        for (Map.Entry<String, float[]> e : pending.entrySet()) {
            entry(zip, PENDING + e.getKey(), e.getValue(), new long[] {e.getValue().length});
        }
        if (replica != null) {
            for (Map.Entry<String, Tensor> e : replica.entrySet()) {
                entry(zip, REPLICA + e.getKey(), e.getValue().data, e.getValue().shape);
            }
        }
        zip.finish();
        return bytes.toByteArray();
    }

    private static void entry(ZipOutputStream zip, String name, float[] values, long[] shape) throws IOException {
        ByteBuffer raw = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        raw.asFloatBuffer().put(values);
        byte[] npy = Npy.encode("float32", shape, raw.array());
        ZipEntry entry = new ZipEntry(name + ".npy");
        entry.setMethod(ZipEntry.STORED);
        entry.setSize(npy.length);
        entry.setCompressedSize(npy.length);
        java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        crc.update(npy, 0, npy.length);
        entry.setCrc(crc.getValue());
        zip.putNextEntry(entry);
        zip.write(npy, 0, npy.length);
        zip.closeEntry();
    }

    /** Write the state to {@code file} atomically (temporary file, fsync, rename). */
    public void save(File file) throws IOException {
        byte[] bytes = toBytes();
        File tmp = new File(file.getPath() + ".tmp");
        FileOutputStream out = new FileOutputStream(tmp);
        try {
            out.write(bytes);
            out.flush();
            out.getFD().sync();
        } finally {
            out.close();
        }
        if (!tmp.renameTo(file)) { // POSIX rename replaces the target atomically; elsewhere: delete first
            if (!file.delete() || !tmp.renameTo(file)) {
                throw new IOException("cannot rename " + tmp + " to " + file);
            }
        }
    }
}
