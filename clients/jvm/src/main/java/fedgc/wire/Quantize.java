package fedgc.wire;

import fedgc.supernode.Unsigned;

/**
 * Value encodings of wire format v3 (docs/wire-format.md, "Format v3"), as fedgc's
 * {@code fedgc/wire/quantize.py}, with the same arithmetic so that both write the same bytes:
 * <ul>
 *   <li>{@code fp32}, {@code fp16}: the values themselves (fp16 saturated at ±65504);</li>
 *   <li>{@code int8}, {@code int4}: per block of {@code B} values (0: one block), {@code m} = the
 *   largest {@code |v|} (f32), {@code scale = m / L} in f32 ({@code L} = 127, 7),
 *   {@code c = round_half_even(v / scale)} in f32 clamped to {@code ±L} (all 0 when the scale is 0);
 *   the receiver sees {@code c · scale} (one f32 product);</li>
 *   <li>{@code sign}: per block, the {@code |v|} summed in f64 in index order, divided by the block's
 *   length in f64, rounded once to f32; one sign bit per value (1 = negative, −0 included); the
 *   receiver sees {@code ±scale}.</li>
 * </ul>
 * A block longer than the values is one block: nothing is ever sized by the block (an unsigned 64-bit
 * number, as on the wire). {@link #quantize} is what the receiver decodes, for error feedback.
 */
public final class Quantize {
    /** The encodings; each one's wire code ({@code u8 enc}) is its position. */
    public static final String[] ENCODINGS = {"fp32", "fp16", "int8", "int4", "sign"};
    public static final int FP32 = 0, FP16 = 1, INT8 = 2, INT4 = 3, SIGN = 4;

    private Quantize() {}

    /** The wire code of an encoding name ({@code IllegalArgumentException} for any other name). */
    public static int code(String name) {
        for (int i = 0; i < ENCODINGS.length; i++) {
            if (ENCODINGS[i].equals(name)) {
                return i;
            }
        }
        throw new IllegalArgumentException("unknown value encoding '" + name + "'; one of fp32, fp16, int8, int4, sign");
    }

    /** Whether the encoding carries a scale per block (int8, int4, sign). */
    public static boolean scaled(int encoding) {
        return encoding == INT8 || encoding == INT4 || encoding == SIGN;
    }

    /** The largest code magnitude of int8 (127) and int4 (7). */
    public static int levels(int encoding) {
        return encoding == INT8 ? 127 : 7;
    }

    /** Bits per value on the wire, scales not counted. */
    public static int valueBits(int encoding) {
        switch (encoding) {
            case FP32: return 32;
            case FP16: return 16;
            case INT8: return 8;
            case INT4: return 4;
            case SIGN: return 1;
            default: throw new IllegalArgumentException("value encoding code " + encoding);
        }
    }

    /** Bytes of {@code count} values' codes (int4: two per byte, sign: eight per byte). */
    public static long codeBytes(int encoding, int count) {
        return ((long) count * valueBits(encoding) + 7) / 8;
    }

    /** Values per block for {@code count} values: all of them when {@code block} is 0 or ≥ count. */
    static int blockWidth(int count, long block) {
        return block == 0 || Unsigned.compare(block, count) >= 0 ? count : (int) block;
    }

    /** Scales for {@code count} values in blocks of {@code block} (unsigned; 0: one block). */
    public static int blockCount(int count, long block) {
        if (count == 0) {
            return 0;
        }
        int width = blockWidth(count, block);
        return (int) (((long) count + width - 1) / width);
    }

    /** What the receiver decodes for {@code values} sent in {@code encoding} (f32, same length):
     * error feedback keeps {@code values − quantize(values, …)} in the residual. */
    public static float[] quantize(float[] values, String encoding, long block) {
        int[] all = new int[values.length];
        for (int i = 0; i < all.length; i++) {
            all[i] = i;
        }
        return wire(all, values, encoding, block, new long[] {values.length}).toDense();
    }

    /**
     * The wire form of a sparse entry whose kept values are {@code values} at {@code indices}: a
     * {@link Payload.Sparse} (fp32, or fp16 saturated and rounded) or a {@link Payload.CodedSparse}
     * (int8, int4, sign). Throws {@code IllegalArgumentException} for non-finite values, and for a
     * scaled encoding whose code × scale overflows (values near the f32 maximum), as Python does.
     */
    public static Payload wire(int[] indices, float[] values, String encoding, long block, long[] shape) {
        int enc = code(encoding);
        if (!Codec.finite(values)) {
            throw new IllegalArgumentException("values must be finite");
        }
        int count = values.length;
        if (enc == FP32 || enc == FP16) {
            float[] sent = new float[count];
            for (int i = 0; i < count; i++) {
                sent[i] = enc == FP16 ? Half.saturate(values[i]) : values[i];
            }
            return new Payload.Sparse(enc == FP16 ? Payload.F16 : Payload.F32, indices.clone(), sent, shape);
        }
        int width = blockWidth(count, block);
        float[] scales = new float[blockCount(count, block)];
        byte[] codes = new byte[count];
        for (int s = 0; s < scales.length; s++) {
            int from = s * width, to = Math.min(count, from + width);
            if (enc == SIGN) {
                double sum = 0;
                for (int i = from; i < to; i++) {
                    sum += Math.abs((double) values[i]);
                    codes[i] = (byte) (Float.floatToRawIntBits(values[i]) >>> 31);
                }
                scales[s] = (float) (sum / (to - from));
                continue;
            }
            int levels = levels(enc);
            float max = 0f;
            for (int i = from; i < to; i++) {
                max = Math.max(max, Math.abs(values[i]));
            }
            float scale = max / (float) levels;
            scales[s] = scale;
            for (int i = from; i < to; i++) {
                if (scale > 0) {
                    float quotient = values[i] / scale;
                    double c = Math.rint(quotient);
                    codes[i] = (byte) Math.max(-levels, Math.min(levels, c));
                }
            }
        }
        Payload.CodedSparse out = new Payload.CodedSparse(enc, block, indices.clone(), codes, scales, shape);
        if (!Codec.finite(out.values)) {
            throw new IllegalArgumentException("values too close to the f32 maximum for a scaled encoding");
        }
        return out;
    }

    /** The receiver's values: {@code c · scale} (int8, int4) or {@code ±scale} (sign), per value's block. */
    static float[] dequantize(byte[] codes, float[] scales, int encoding, long block) {
        int count = codes.length;
        float[] out = new float[count];
        if (count == 0) {
            return out;
        }
        int width = blockWidth(count, block);
        for (int i = 0; i < count; i++) {
            float scale = scales[i / width];
            out[i] = encoding == SIGN ? (codes[i] != 0 ? -scale : scale) : (float) codes[i] * scale;
        }
        return out;
    }
}
