package fedgc.compress;

import fedgc.wire.Payload;

/**
 * {@code topk}: the {@code k = ceil(density · n)} entries of largest magnitude, exact, as fedgc's
 * {@code fedgc/compress/topk.py}; use it with error feedback ({@link ResidualMemory}).
 */
public final class TopK extends Compressor {
    @Override
    public Payload compress(Tensor tensor, CompressionContext ctx) {
        int n = tensor.numel();
        int k = kFor(n, ctx.density);
        return sparse(tensor, k >= n ? range(n) : Selection.topK(tensor.data, k));
    }
}
