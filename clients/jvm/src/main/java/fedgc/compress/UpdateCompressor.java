package fedgc.compress;

import fedgc.wire.Half;
import fedgc.wire.Payload;
import fedgc.wire.Quantize;
import java.util.LinkedHashMap;
import java.util.Map;

/** fedgc's {@code compress_update} (fedgc/compress/update.py): every tensor compensated, compressed, remembered. */
public final class UpdateCompressor {
    private UpdateCompressor() {}

    /**
     * Compress every tensor of {@code update} (in its order); the memory keeps exactly what was not
     * sent: for every name, sent + new residual == compensated input. Tensors with {@code dim ≤ 1}
     * are sent dense when {@code denseSmallTensors}. {@code valueDtype} is a value encoding's code
     * ({@link Quantize#FP32} = {@link Payload#F32}, {@link Quantize#FP16} = {@link Payload#F16}: values
     * saturated at ±65504 and rounded to fp16; {@link Quantize#INT8}, {@link Quantize#INT4},
     * {@link Quantize#SIGN}: wire format v3, each sparse payload's values coded with one scale per
     * tensor and dense payloads fp16, as fedgc's {@code _with_value_dtype}); what was sent is what the
     * receiver decodes, so the memory keeps the rounding too. Throws {@code IllegalArgumentException}
     * when a v3 encoding meets non-finite values (or values near the f32 maximum), as Python does.
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
        if (Quantize.scaled(dtype)) {
            if (payload instanceof Payload.Dense) {
                return withValueDtype(payload, Payload.F16); // the narrowest dense values the wire has
            }
            if (!(payload instanceof Payload.Sparse)) {
                return payload; // a coded one already, other kinds
            }
            Payload.Sparse p = (Payload.Sparse) payload;
            return Quantize.wire(p.indices, p.values, Quantize.ENCODINGS[dtype], 0, p.shape);
        }
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
