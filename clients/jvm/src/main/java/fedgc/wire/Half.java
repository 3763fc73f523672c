package fedgc.wire;

/** IEEE-754 binary16 conversions (Java 8 has no Float.floatToFloat16): round to nearest, ties to even. */
public final class Half {
    /** fp16's largest finite value. */
    public static final float MAX = 65504f;

    private Half() {}

    /** The binary16 bits nearest to {@code f} (as numpy/torch {@code .astype(float16)}: overflow → ±Inf). */
    public static short fromFloat(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int abs = bits & 0x7fffffff;
        if (abs >= 0x7f800000) { // Inf or NaN (a NaN stays a quiet NaN)
            return (short) (sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 | ((abs >>> 13) & 0x3ff) : 0));
        }
        if (abs >= 0x477ff000) { // ≥ 65520 rounds to Inf
            return (short) (sign | 0x7c00);
        }
        if (abs >= 0x38800000) { // a normal half (≥ 2^-14)
            int h = (((abs >>> 23) - 112) << 10) | ((abs >>> 13) & 0x3ff);
            int rest = abs & 0x1fff;
            if (rest > 0x1000 || (rest == 0x1000 && (h & 1) != 0)) {
                h++;
            }
            return (short) (sign | h);
        }
        if (abs < 0x33000000) { // below 2^-25: zero (2^-25 itself ties to even, also zero)
            return (short) sign;
        }
        int exp = abs >>> 23;
        int mant = (abs & 0x7fffff) | 0x800000;
        int shift = 126 - exp; // value in units of 2^-24 is mant >> shift
        int h = mant >>> shift;
        int rest = mant & ((1 << shift) - 1);
        int half = 1 << (shift - 1);
        if (rest > half || (rest == half && (h & 1) != 0)) {
            h++;
        }
        return (short) (sign | h);
    }

    public static float toFloat(short half) {
        int h = half & 0xffff;
        int sign = (h & 0x8000) << 16;
        int exp = (h >>> 10) & 0x1f;
        int mant = h & 0x3ff;
        if (exp == 0x1f) {
            return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        }
        if (exp == 0) {
            float v = mant * 0x1p-24f; // exact
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }

    /** {@code f} rounded to fp16 and back. */
    public static float round(float f) {
        return toFloat(fromFloat(f));
    }

    /** fedgc's {@code to_value_dtype(…, float16)}: saturate at ±65504, then round to fp16. */
    public static float saturate(float f) {
        return round(f > MAX ? MAX : (f < -MAX ? -MAX : f));
    }
}
