package fedgc.wire;

import fedgc.supernode.Unsigned;

/**
 * What a compressor produces for one parameter and what the update blob carries (one entry per
 * parameter, docs/wire-format.md), as fedgc's {@code fedgc/compress/payloads.py}. Every payload knows
 * its parameter's shape and rebuilds the dense fp32 values it stands for ({@link #toDense}), computed
 * in f32 exactly as the Python payloads compute them. Sign bits: 1 = negative.
 */
public abstract class Payload {
    public static final int DENSE = 0, SPARSE = 1, SIGN = 2, VOTE = 3, TERNARY = 4, QSGD = 5, NATURAL = 6,
        LOWRANK = 7, STC = 8;
    /** Value dtype codes of dense, sparse and lowrank values. */
    public static final int F32 = 0, F16 = 1;

    public final long[] shape;
    public final int numel;

    Payload(long[] shape) {
        this.shape = shape.clone();
        this.numel = numel(shape);
    }

    /** Elements of a parameter of this shape (checked to fit a Java array). */
    public static int numelOf(long[] shape) {
        return numel(shape);
    }

    static int numel(long[] shape) {
        long n = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("negative dimension");
            }
            n *= d;
            if (n > Integer.MAX_VALUE - 8) {
                throw new IllegalArgumentException("parameter too large for a Java array: " + n);
            }
        }
        return (int) n;
    }

    public abstract int kind();

    public abstract float[] toDense();

    /** Entries the payload carries (numel for dense kinds, k for sparse ones), as fedgc's {@code payload_elements}. */
    public int elements() {
        return numel;
    }

    static boolean bit(byte[] bits, int i) {
        return (bits[i >>> 3] >>> (i & 7) & 1) != 0;
    }

    static float[] checkValues(float[] values, int dtype) {
        if (dtype != F32 && dtype != F16) {
            throw new IllegalArgumentException("value dtype " + dtype);
        }
        return values;
    }

    /** Whole tensor; fp16 values must be exactly representable in fp16 (use {@link Half#saturate}). */
    public static final class Dense extends Payload {
        public final int dtype;
        public final float[] values;

        public Dense(int dtype, float[] values, long[] shape) {
            super(shape);
            this.dtype = dtype;
            this.values = checkValues(values, dtype);
            if (values.length != numel) {
                throw new IllegalArgumentException(values.length + " values for " + numel + " entries");
            }
        }

        public int kind() {
            return DENSE;
        }

        public float[] toDense() {
            return values.clone();
        }
    }

    /** Selected entries: strictly increasing flat {@code indices} and their values. */
    public static final class Sparse extends Payload {
        public final int dtype;
        public final int[] indices;
        public final float[] values;

        public Sparse(int dtype, int[] indices, float[] values, long[] shape) {
            super(shape);
            this.dtype = dtype;
            this.indices = indices;
            this.values = checkValues(values, dtype);
            if (indices.length != values.length) {
                throw new IllegalArgumentException(indices.length + " indices, " + values.length + " values");
            }
        }

        public int kind() {
            return SPARSE;
        }

        public int elements() {
            return indices.length;
        }

        public float[] toDense() {
            float[] out = new float[numel];
            for (int j = 0; j < indices.length; j++) {
                out[indices[j]] = values[j];
            }
            return out;
        }
    }

    /**
     * A sparse entry whose values travel in a wire format v3 scaled encoding ({@link Quantize#INT8},
     * {@link Quantize#INT4}, {@link Quantize#SIGN}), as fedgc's {@code CodedSparsePayload}: per kept
     * entry a code (int8/int4: the integer −L…L; sign: 1 = negative), one f32 scale per block of
     * {@code block} values (unsigned; 0 or ≥ k: one block), and {@link #values}, what the receiver
     * sees ({@code c · scale} or {@code ±scale}). Kind {@link #SPARSE}; made by {@link Quantize#wire}
     * or by decoding a v3 blob. Version 1 sends it as fp32 sparse values.
     */
    public static final class CodedSparse extends Payload {
        public final int encoding;
        public final long block;
        public final int[] indices;
        public final byte[] codes;
        public final float[] scales;
        public final float[] values;

        public CodedSparse(int encoding, long block, int[] indices, byte[] codes, float[] scales, long[] shape) {
            super(shape);
            if (!Quantize.scaled(encoding)) {
                throw new IllegalArgumentException("value encoding " + encoding + " has no scale");
            }
            if (codes.length != indices.length || scales.length != Quantize.blockCount(indices.length, block)) {
                throw new IllegalArgumentException(indices.length + " indices, " + codes.length + " codes, "
                    + scales.length + " scales");
            }
            int levels = encoding == Quantize.SIGN ? 1 : Quantize.levels(encoding);
            for (byte c : codes) {
                if (encoding == Quantize.SIGN ? (c != 0 && c != 1) : (c < -levels || c > levels)) {
                    throw new IllegalArgumentException("code " + c + " outside the encoding's range");
                }
            }
            this.encoding = encoding;
            this.block = block;
            this.indices = indices;
            this.codes = codes;
            this.scales = scales;
            this.values = Quantize.dequantize(codes, scales, encoding, block);
        }

        public int kind() {
            return SPARSE;
        }

        public int elements() {
            return indices.length;
        }

        public float[] toDense() {
            float[] out = new float[numel];
            for (int j = 0; j < indices.length; j++) {
                out[indices[j]] = values[j];
            }
            return out;
        }
    }

    /** One bit per element: +pos (bit 0) or −neg (bit 1). */
    public static final class Sign extends Payload {
        public final byte[] signs;
        public final float pos, neg;

        public Sign(byte[] signs, float pos, float neg, long[] shape) {
            super(shape);
            this.signs = signs;
            this.pos = pos;
            this.neg = neg;
        }

        public int kind() {
            return SIGN;
        }

        public float[] toDense() {
            float[] out = new float[numel];
            for (int i = 0; i < numel; i++) {
                out[i] = bit(signs, i) ? -neg : pos;
            }
            return out;
        }
    }

    /** One bit per element, ±scale (aggregated by weighted majority vote on the server). */
    public static final class Vote extends Payload {
        public final byte[] signs;
        public final float scale;

        public Vote(byte[] signs, float scale, long[] shape) {
            super(shape);
            this.signs = signs;
            this.scale = scale;
        }

        public int kind() {
            return VOTE;
        }

        public float[] toDense() {
            float[] out = new float[numel];
            for (int i = 0; i < numel; i++) {
                out[i] = bit(signs, i) ? -scale : scale;
            }
            return out;
        }
    }

    /** Codes 0 → 0, 1 → +scale, 2 → −scale, five per byte in base 3. */
    public static final class Ternary extends Payload {
        public final byte[] trits;
        public final float scale;

        public Ternary(byte[] trits, float scale, long[] shape) {
            super(shape);
            this.trits = trits;
            this.scale = scale;
        }

        public int kind() {
            return TERNARY;
        }

        public float[] toDense() {
            float[] out = new float[numel];
            for (int i = 0; i < numel; i++) {
                int code = (trits[i / 5] & 0xff);
                for (int t = i % 5; t > 0; t--) {
                    code /= 3;
                }
                code %= 3;
                out[i] = code == 0 ? 0f : (code == 1 ? scale : -scale);
            }
            return out;
        }
    }

    /** QSGD: per bucket an L2 norm, per element a code c ≤ 2s (level c − s) of {@code width()} bits. */
    public static final class Qsgd extends Payload {
        public final int levels;
        /** The bucket size as sent (unsigned 64-bit; a bucket longer than the tensor is one bucket). */
        public final long bucket;
        public final float[] norms;
        public final byte[] codes;

        public Qsgd(int levels, long bucket, float[] norms, byte[] codes, long[] shape) {
            super(shape);
            this.levels = levels;
            this.bucket = bucket;
            this.norms = norms;
            this.codes = codes;
        }

        public int kind() {
            return QSGD;
        }

        public int width() {
            return 32 - Integer.numberOfLeadingZeros(2 * levels);
        }

        /** Entries per bucket as the decoder computes with: min(d, n), at least 1. */
        public int effectiveBucket() {
            return Unsigned.compare(bucket, numel) > 0 ? Math.max(1, numel) : (int) Math.max(1, bucket);
        }

        public int code(int i) {
            int w = width();
            long bit = (long) i * w;
            int c = 0;
            for (int b = 0; b < w; b++, bit++) {
                c |= ((codes[(int) (bit >>> 3)] >>> (int) (bit & 7)) & 1) << b;
            }
            return c;
        }

        public float[] toDense() {
            float[] out = new float[numel];
            int d = effectiveBucket();
            float s = levels;
            for (int i = 0; i < numel; i++) {
                float level = code(i) - levels;
                out[i] = level * norms[i / d] / s;
            }
            return out;
        }
    }

    /** Natural compression: ±2^(e−127) per element (e = 0: zero). */
    public static final class Natural extends Payload {
        public final byte[] exponents;
        public final byte[] signs;

        public Natural(byte[] exponents, byte[] signs, long[] shape) {
            super(shape);
            this.exponents = exponents;
            this.signs = signs;
        }

        public int kind() {
            return NATURAL;
        }

        public float[] toDense() {
            float[] out = new float[numel];
            for (int i = 0; i < numel; i++) {
                out[i] = Float.intBitsToFloat((bit(signs, i) ? 1 << 31 : 0) | (exponents[i] & 0xff) << 23);
            }
            return out;
        }
    }

    /** PowerSGD factors: the parameter as a rows × cols matrix ≈ P (rows × r) · Qᵀ (cols × r), row-major. */
    public static final class LowRank extends Payload {
        public final int dtype;
        public final int rank;
        public final float[] p, q;

        public LowRank(int dtype, int rank, float[] p, float[] q, long[] shape) {
            super(shape);
            this.dtype = dtype;
            this.rank = rank;
            this.p = checkValues(p, dtype);
            this.q = checkValues(q, dtype);
            if (p.length != rows() * rank || q.length != cols() * rank) {
                throw new IllegalArgumentException("factor sizes do not match rank " + rank);
            }
        }

        public int kind() {
            return LOWRANK;
        }

        public int rows() {
            return shape.length == 0 ? 1 : (int) shape[0];
        }

        public int cols() {
            return rows() == 0 ? 0 : numel / rows();
        }

        public float[] toDense() {
            int rows = rows(), cols = cols();
            float[] out = new float[numel];
            for (int i = 0; i < rows; i++) {
                for (int j = 0; j < cols; j++) {
                    float acc = 0f;
                    for (int t = 0; t < rank; t++) {
                        acc += p[i * rank + t] * q[j * rank + t];
                    }
                    out[i * cols + j] = acc;
                }
            }
            return out;
        }
    }

    /** STC: indices each carrying ±scale, one sign bit per index. */
    public static final class Stc extends Payload {
        public final float scale;
        public final int[] indices;
        public final byte[] signs;

        public Stc(float scale, int[] indices, byte[] signs, long[] shape) {
            super(shape);
            this.scale = scale;
            this.indices = indices;
            this.signs = signs;
        }

        public int kind() {
            return STC;
        }

        public int elements() {
            return indices.length;
        }

        public float[] toDense() {
            float[] out = new float[numel];
            for (int j = 0; j < indices.length; j++) {
                out[indices[j]] = bit(signs, j) ? -scale : scale;
            }
            return out;
        }
    }
}
