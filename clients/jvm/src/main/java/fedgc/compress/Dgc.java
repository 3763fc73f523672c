package fedgc.compress;

import fedgc.wire.Payload;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code dgc}: Deep Gradient Compression's compressor (fedgc's {@code fedgc/compress/dgc.py}) with
 * exact top-k selection: the same as fedgc's DGC with {@code sample_ratio = 1.0} (and with any
 * sample ratio for tensors of at most 1000 entries). fedgc's sampled threshold estimate draws its
 * sample from the torch generator that local training advanced, which a Java client cannot
 * reproduce. The memory is a {@link DgcMemory}; the warm-up density comes from the server's message.
 *
 * <p>Local gradient clipping ({@code clipNorm} not null): the whole update is scaled to a global L2
 * norm of at most {@code clipNorm / sqrt(N)} (N = clients this round), with PyTorch's arithmetic:
 * {@code coef = min(1, (1 / (norm + 1e-6)) · maxNorm)} in float32. The norm is computed in double
 * precision and rounded to float32 (per tensor, then over the tensors); PyTorch sums float32 squares in
 * a CPU-dependent SIMD order, so its norm (and the clipped update) can differ from this one in the
 * last bit.
 */
public final class Dgc extends Compressor {
    public final Double clipNorm;

    public Dgc(Double clipNorm) {
        this.clipNorm = clipNorm;
    }

    public Dgc() {
        this(null);
    }

    @Override
    public LinkedHashMap<String, Tensor> prepareUpdate(LinkedHashMap<String, Tensor> update, CompressionContext ctx) {
        if (clipNorm == null || update.isEmpty()) {
            return update;
        }
        return clip(update, clipNorm / Math.sqrt(Math.max(1, ctx.numClients)));
    }

    /** fedgc's {@code clip_update}: the whole update scaled so its global L2 norm is at most {@code maxNorm}. */
    public static LinkedHashMap<String, Tensor> clip(LinkedHashMap<String, Tensor> update, double maxNorm) {
        double outer = 0;
        for (Tensor t : update.values()) {
            float inner = norm(t.data);
            outer += (double) inner * inner;
        }
        float total = (float) Math.sqrt(outer);
        float coef = (1f / (total + 1e-6f)) * (float) maxNorm; // torch: max_norm / t is t.reciprocal() * max_norm
        coef = Math.min(coef, 1f);
        LinkedHashMap<String, Tensor> out = new LinkedHashMap<>();
        for (Map.Entry<String, Tensor> e : update.entrySet()) {
            float[] data = e.getValue().data;
            float[] scaled = new float[data.length];
            for (int i = 0; i < data.length; i++) {
                scaled[i] = data[i] * coef;
            }
            out.put(e.getKey(), new Tensor(e.getValue().shape, scaled));
        }
        return out;
    }

    /** L2 norm: squares summed in double, the root rounded to float32. */
    public static float norm(float[] x) {
        double sum = 0;
        for (float v : x) {
            sum += (double) v * v;
        }
        return (float) Math.sqrt(sum);
    }

    @Override
    public Payload compress(Tensor tensor, CompressionContext ctx) {
        int n = tensor.numel();
        int k = kFor(n, ctx.density);
        return sparse(tensor, k >= n ? range(n) : Selection.topK(tensor.data, k));
    }
}
