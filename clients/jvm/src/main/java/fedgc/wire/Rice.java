package fedgc.wire;

import fedgc.supernode.Unsigned;

/**
 * Golomb–Rice index blocks of wire format v3 (docs/wire-format.md, "Format v3"), as fedgc's
 * {@code fedgc/wire/golomb.py}: {@code varint k}; if {@code k > 0}, {@code u8 b} and one bit stream
 * (bit {@code i} is bit {@code i % 8} of byte {@code i / 8}): the {@code k} unary quotients
 * ({@code gap >> b} zero bits, then a one bit), then the {@code k} remainders ({@code b} bits each,
 * low bit first), then zero padding to a byte.
 */
final class Rice {
    /** The largest Rice parameter of the format. */
    static final int MAX_PARAMETER = 48;

    private Rice() {}

    /** The encoder's rule: {@code b = floor(log2(floor(S / k)))}, 0 when the mean gap is below 1, at most 48. */
    static int parameter(long gapSum, int count) {
        long mean = count == 0 ? 0 : gapSum / count;
        return Math.min(MAX_PARAMETER, Math.max(0, 63 - Long.numberOfLeadingZeros(mean)));
    }

    /** The largest {@code b} a decoder accepts for {@code numel} entries: {@code 2^b ≤ numel}, {@code b ≤ 48}. */
    static int maxParameter(int numel) {
        return Math.min(MAX_PARAMETER, Math.max(0, 31 - Integer.numberOfLeadingZeros(numel)));
    }

    /** Write the index block of strictly increasing {@code indices} below {@code numel}. */
    static void encode(ByteSink out, int[] indices, int numel) {
        int k = indices.length;
        long sum = 0;
        long unary = 0;
        int previous = -1;
        for (int index : indices) {
            if (index <= previous || index >= numel) {
                throw new IllegalArgumentException("indices must be strictly increasing and below " + numel);
            }
            sum += index - previous - 1;
            previous = index;
        }
        out.varint(k);
        if (k == 0) {
            return;
        }
        int b = parameter(sum, k);
        previous = -1;
        for (int index : indices) {
            unary += ((index - previous - 1) >>> b) + 1;
            previous = index;
        }
        long bits = unary + (long) k * b;
        long size = (bits + 7) / 8;
        if (size > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("index block of " + size + " bytes");
        }
        byte[] stream = new byte[(int) size];
        long end = -1;
        long bit = unary;
        previous = -1;
        for (int index : indices) {
            int gap = index - previous - 1;
            previous = index;
            end += (gap >>> b) + 1;
            stream[(int) (end >>> 3)] |= (byte) (1 << (int) (end & 7));
            for (int t = 0; t < b; t++, bit++) {
                if ((gap >>> t & 1) != 0) {
                    stream[(int) (bit >>> 3)] |= (byte) (1 << (int) (bit & 7));
                }
            }
        }
        out.u8(b);
        out.bytes(stream);
    }

    /**
     * Read one index block at {@code data[pos]} for a parameter of {@code numel} entries; the indices
     * are returned and {@code end[0]} is set to the first byte after the block. Checked in reading
     * order with Python's reasons: {@code k} (cut: truncated; 11 bytes or ≥ 2^64: bad-varint;
     * {@code k > numel}: bad-indices), {@code b} (missing: truncated; above {@link #maxParameter}:
     * bad-indices), the quotients (no {@code k}-th one bit within {@code ((numel − k) >> b) + k} bits:
     * truncated if the blob ends first, else bad-indices), the remainders (cut: truncated), the padding
     * (set: bad-indices), the last index (≥ numel: bad-indices). Nothing beyond {@code k ≤ numel}
     * ints is allocated, whatever the blob says.
     */
    static int[] decode(byte[] data, int pos, int numel, String name, int[] end) throws CodecException {
        long[] count = new long[1];
        int used;
        try {
            used = Varints.read(data, pos, data.length, count, 1);
        } catch (Varints.TooLong err) {
            throw new CodecException("bad-varint", name + ": " + err.getMessage());
        } catch (Varints.Truncated err) {
            throw new CodecException("truncated", name + ": " + err.getMessage());
        }
        if (Unsigned.compare(count[0], numel) > 0) {
            throw new CodecException("bad-indices", name + ": " + Unsigned.toString(count[0]) + " indices for "
                + numel + " entries");
        }
        int k = (int) count[0];
        int at = pos + used;
        if (k == 0) {
            end[0] = at;
            return new int[0];
        }
        if (at >= data.length) {
            throw new CodecException("truncated", name + ": no Rice parameter byte");
        }
        int b = data[at] & 0xff;
        if (b > maxParameter(numel)) {
            throw new CodecException("bad-indices", name + ": Rice parameter " + b + " above " + maxParameter(numel)
                + " for " + numel + " entries");
        }
        int start = at + 1;
        long body = data.length - start;
        // Σ quotients ≤ (Σ gaps) >> b ≤ (numel − k) >> b: the k one bits end within this many bits.
        long unaryMax = ((long) (numel - k) >> b) + k;
        long window = Math.min(unaryMax, body * 8);
        // the quotients first, then the indices; k > window bits cannot all be there (refused below),
        // so what a hostile k makes this allocate is bounded by the blob's bytes as well as by numel
        int[] out = new int[(int) Math.min(k, window)];
        int found = 0;
        long last = -1;
        for (long i = 0; i * 8 < window && found < k; i++) {
            int bits = data[start + (int) i] & 0xff;
            long left = window - i * 8;
            if (left < 8) {
                bits &= (1 << (int) left) - 1;
            }
            while (bits != 0 && found < k) {
                long one = i * 8 + Integer.numberOfTrailingZeros(bits);
                out[found++] = (int) (one - last - 1);
                last = one;
                bits &= bits - 1;
            }
        }
        if (found < k) {
            if (body * 8 < unaryMax) {
                throw new CodecException("truncated", name + ": the blob ends within the unary part of gap " + found);
            }
            throw new CodecException("bad-indices", name + ": gap " + found + ": the gaps run past " + numel + " entries");
        }
        long unaryBits = last + 1;
        long totalBits = unaryBits + (long) k * b;
        long bytes = (totalBits + 7) / 8;
        if (body < bytes) {
            throw new CodecException("truncated", name + ": Rice stream needs " + bytes + " bytes, " + body + " left");
        }
        int spare = (int) (totalBits % 8);
        if (spare != 0 && ((data[start + (int) bytes - 1] & 0xff) >>> spare) != 0) {
            throw new CodecException("bad-indices", name + ": Rice stream padding bits set");
        }
        long index = -1;
        long bit = unaryBits;
        long mask = (1L << b) - 1;
        for (int j = 0; j < k; j++, bit += b) {
            long gap = (long) out[j] << b;
            if (b > 0) {
                int first = start + (int) (bit >>> 3);
                int shift = (int) (bit & 7);
                long word = 0;
                for (int t = 0; t < (shift + b + 7) >>> 3; t++) {
                    word |= (long) (data[first + t] & 0xff) << (8 * t);
                }
                gap |= (word >>> shift) & mask;
            }
            index += gap + 1; // ≤ numel + k·2^b < 2^63: no overflow; only the last index needs a check
            out[j] = (int) index;
        }
        if (index >= numel) {
            throw new CodecException("bad-indices", name + ": index " + index + " ≥ " + numel);
        }
        end[0] = start + (int) bytes;
        return out;
    }
}
