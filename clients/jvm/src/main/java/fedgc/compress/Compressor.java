package fedgc.compress;

import fedgc.wire.Payload;
import java.util.LinkedHashMap;

/** One compression method, stateless (error feedback lives in a {@link Memory}), as fedgc's {@code Compressor}. */
public abstract class Compressor {
    /** Hook on the whole update before per-tensor compensation (DGC clips here). */
    public LinkedHashMap<String, Tensor> prepareUpdate(LinkedHashMap<String, Tensor> update, CompressionContext ctx) {
        return update;
    }

    /** Encode one (compensated) tensor. */
    public abstract Payload compress(Tensor tensor, CompressionContext ctx);

    /** fedgc's {@code k_for}: {@code max(1, min(n, ceil(density · n)))}. */
    public static int kFor(int numel, double density) {
        return (int) Math.max(1, Math.min(numel, (long) Math.ceil(density * numel)));
    }

    /** The sparse payload of the given (sorted) indices of {@code tensor}, values fp32. */
    static Payload.Sparse sparse(Tensor tensor, int[] indices) {
        float[] values = new float[indices.length];
        for (int j = 0; j < indices.length; j++) {
            values[j] = tensor.data[indices[j]];
        }
        return new Payload.Sparse(Payload.F32, indices, values, tensor.shape);
    }

    static int[] range(int n) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = i;
        }
        return out;
    }
}
