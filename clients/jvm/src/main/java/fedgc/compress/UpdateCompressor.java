package fedgc.compress;

import fedgc.wire.Half;
import fedgc.wire.Payload;
import java.util.LinkedHashMap;
import java.util.Map;

/** fedgc's {@code compress_update} (fedgc/compress/update.py): every tensor compensated, compressed, remembered. */
public final class UpdateCompressor {
    private UpdateCompressor() {}

    /**
     * Compress every tensor of {@code update} (in its order); the memory keeps exactly what was not
     * sent: for every name, sent + new residual == compensated input. Tensors with {@code dim ≤ 1}
     * are sent dense when {@code denseSmallTensors}. {@code valueDtype} is {@link Payload#F32} or
     * {@link Payload#F16} (values saturated at ±65504 and rounded to fp16; the memory keeps the error).
     */
    public static CompressedUpdate compress(LinkedHashMap<String, Tensor> update, Compressor compressor, Memory memory,
                                            CompressionContext ctx, boolean denseSmallTensors, int valueDtype) {
        LinkedHashMap<String, Payload> payloads = new LinkedHashMap<>();
        LinkedHashMap<String, float[]> sent = new LinkedHashMap<>();
        long elementsSent = 0, elementsTotal = 0;
        update = compressor.prepareUpdate(update, ctx);
        for (Map.Entry<String, Tensor> e : update.entrySet()) {
            String name = e.getKey();
            Tensor tensor = e.getValue();
            Tensor compensated = new Tensor(tensor.shape, memory.compensate(name, tensor.data));
            Payload payload;
            if (denseSmallTensors && tensor.dim() <= 1) {
                payload = new Payload.Dense(Payload.F32, compensated.data.clone(), tensor.shape);
            } else {
                payload = compressor.compress(compensated, ctx);
            }
            payload = withValueDtype(payload, valueDtype);
            float[] dense = payload.toDense();
            memory.update(name, tensor.shape, compensated.data, dense);
            payloads.put(name, payload);
            sent.put(name, dense);
            elementsTotal += tensor.numel();
            elementsSent += payload.elements();
        }
        return new CompressedUpdate(payloads, sent, elementsSent, elementsTotal);
    }

    static Payload withValueDtype(Payload payload, int dtype) {
        if (payload instanceof Payload.Dense) {
            Payload.Dense p = (Payload.Dense) payload;
            return p.dtype == dtype ? p : new Payload.Dense(dtype, convert(p.values, dtype), p.shape);
        }
        if (payload instanceof Payload.Sparse) {
            Payload.Sparse p = (Payload.Sparse) payload;
            return p.dtype == dtype ? p : new Payload.Sparse(dtype, p.indices, convert(p.values, dtype), p.shape);
        }
        return payload;
    }

    private static float[] convert(float[] values, int dtype) {
        float[] out = new float[values.length];
        for (int i = 0; i < values.length; i++) {
            out[i] = dtype == Payload.F16 ? Half.saturate(values[i]) : values[i];
        }
        return out;
    }
}
