package fedgc.wire;

/**
 * Unsigned LEB128 varints as fedgc's {@code read_varints} reads them (fedgc/wire/varint.py). The codec
 * reads one at a time ({@code count} 1), so the first bad varint of an index block names the reason
 * (docs/wire-format.md, "Which reason"): no terminating byte within the next 10 bytes is
 * {@link TooLong} when those 10 bytes are there, else {@link Truncated}; a 10th byte above 1 (≥ 2^64)
 * is {@link TooLong}. With {@code count} above 1 it looks at {@code count × 10} bytes at most and
 * checks every length before any value.
 */
final class Varints {
    private Varints() {}

    static final class Truncated extends Exception {
        private static final long serialVersionUID = 1L;

        Truncated(String message) {
            super(message);
        }
    }

    static final class TooLong extends Exception {
        private static final long serialVersionUID = 1L;

        TooLong(String message) {
            super(message);
        }
    }

    /** Read {@code count} varints from {@code data[from, end)} into {@code out}; returns the bytes used. */
    static int read(byte[] data, int from, int end, long[] out, int count) throws Truncated, TooLong {
        if (count == 0) {
            return 0;
        }
        long window = Math.min((long) end - from, (long) count * Codec.MAX_VARINT_BYTES);
        int found = 0;
        int last = -1;
        for (int i = 0; i < window && found < count; i++) {
            if ((data[from + i] & 0x80) == 0) {
                found++;
                last = i;
            }
        }
        if (found < count) {
            if (window == (long) count * Codec.MAX_VARINT_BYTES) {
                throw new TooLong("varint longer than 10 bytes");
            }
            throw new Truncated("truncated varint");
        }
        // All lengths are checked before any value (as numpy checks the whole batch).
        int start = 0;
        boolean tooBig = false;
        for (int i = 0; i <= last; i++) {
            if ((data[from + i] & 0x80) == 0) {
                int length = i - start + 1;
                if (length > Codec.MAX_VARINT_BYTES) {
                    throw new TooLong("varint longer than 10 bytes");
                }
                if (length == Codec.MAX_VARINT_BYTES && (data[from + i] & 0xff) > 1) {
                    tooBig = true;
                }
                start = i + 1;
            }
        }
        if (tooBig) {
            throw new TooLong("varint ≥ 2**64");
        }
        int j = 0;
        long value = 0;
        int shift = 0;
        for (int i = 0; i <= last; i++) {
            int b = data[from + i] & 0xff;
            value |= (long) (b & 0x7f) << shift;
            shift += 7;
            if ((b & 0x80) == 0) {
                out[j++] = value;
                value = 0;
                shift = 0;
            }
        }
        return last + 1;
    }
}
