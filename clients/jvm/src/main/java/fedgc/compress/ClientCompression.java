package fedgc.compress;

import fedgc.supernode.Npy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;
import java.util.zip.ZipOutputStream;

/**
 * A client's compression state across rounds, as fedgc's ClientApp keeps it: the compressor, its
 * memory and the pending update. {@link #round} does what {@code train()} does after local training:
 * settle the pending update against the server's {@code applied-rounds}, compress the round's delta
 * (Δ = w_global − w_local) and keep what was sent as pending. {@link #save} and {@link #load} keep
 * the memory and the pending update across restarts of the app (what fedgc's Python client keeps in
 * Flower's {@code context.state}), as an {@code .npz}: {@code memory/KEY} and {@code pending/ROUND/NAME}
 * float32 arrays (1-D), readable with {@code np.load}.
 */
public final class ClientCompression {
    public final Compressor compressor;
    public final Memory memory;
    public final boolean denseSmallTensors;
    /** The value encoding's code ({@code fedgc.wire.Quantize}: FP32, FP16, INT8, INT4, SIGN; see {@link UpdateCompressor#compress}). */
    public final int valueDtype;
    public final PendingUpdates pending = new PendingUpdates();

    public ClientCompression(Compressor compressor, Memory memory, boolean denseSmallTensors, int valueDtype) {
        this.compressor = compressor;
        this.memory = memory;
        this.denseSmallTensors = denseSmallTensors;
        this.valueDtype = valueDtype;
    }

    public CompressedUpdate round(LinkedHashMap<String, Tensor> delta, CompressionContext ctx, Set<Long> appliedRounds) {
        pending.settle(memory, appliedRounds);
        CompressedUpdate update = UpdateCompressor.compress(delta, compressor, memory, ctx, denseSmallTensors, valueDtype);
        pending.record(ctx.round, update);
        return update;
    }

    /** Write the memory and the pending update as an {@code .npz} (stored, not deflated). */
    public void save(OutputStream stream) throws IOException {
        ZipOutputStream zip = new ZipOutputStream(stream);
        for (Map.Entry<String, float[]> e : memory.state().entrySet()) {
            entry(zip, "memory/" + e.getKey(), e.getValue());
        }
        for (Map.Entry<String, float[]> e : pending.entries.entrySet()) {
            entry(zip, "pending/" + e.getKey(), e.getValue());
        }
        zip.finish();
    }

    private static void entry(ZipOutputStream zip, String name, float[] values) throws IOException {
        ByteBuffer raw = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        raw.asFloatBuffer().put(values);
        zip.putNextEntry(new ZipEntry(name + ".npy"));
        byte[] npy = Npy.encode("float32", new long[] {values.length}, raw.array());
        zip.write(npy, 0, npy.length);
        zip.closeEntry();
    }

    /** Replace the memory and the pending update by what {@link #save} wrote. */
    public void load(InputStream stream) throws IOException {
        LinkedHashMap<String, float[]> state = new LinkedHashMap<>();
        LinkedHashMap<String, float[]> pendingEntries = new LinkedHashMap<>();
        ZipInputStream zip = new ZipInputStream(stream);
        byte[] buffer = new byte[1 << 16];
        for (ZipEntry entry = zip.getNextEntry(); entry != null; entry = zip.getNextEntry()) {
            String name = entry.getName();
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            for (int r = zip.read(buffer); r >= 0; r = zip.read(buffer)) {
                bytes.write(buffer, 0, r);
            }
            Npy.Decoded array;
            try {
                array = Npy.decode(bytes.toByteArray());
            } catch (IllegalArgumentException err) {
                throw new IOException(name + ": " + err.getMessage());
            }
            if (!name.endsWith(".npy") || !"float32".equals(array.dtype)) {
                throw new IOException("not a compression state entry: " + name + " (" + array.dtype + ")");
            }
            float[] values = new float[array.raw.length / 4];
            ByteBuffer.wrap(array.raw).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(values);
            String key = name.substring(0, name.length() - 4);
            if (key.startsWith("memory/")) {
                state.put(key.substring("memory/".length()), values);
            } else if (key.startsWith("pending/")) {
                pendingEntries.put(key.substring("pending/".length()), values);
            } else {
                throw new IOException("not a compression state entry: " + name);
            }
        }
        memory.loadState(state);
        pending.entries.clear();
        pending.entries.putAll(pendingEntries);
    }
}
