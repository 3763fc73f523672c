package fedgc.cli.check;

import fedgc.supernode.Unsigned;
import java.util.Random;

/**
 * {@link Unsigned} against the JDK's own {@code Long.compareUnsigned}, {@code Long.toUnsignedString}
 * and {@code Long.parseUnsignedLong} (run on a JDK by tests/test_jvm_android.py): edge values and
 * 200,000 random ones, every pair compared; malformed and out-of-range strings refused as the JDK
 * refuses them. Prints "unsigned ok" or the first failure (exit 1).
 */
public final class UnsignedCheck {
    private UnsignedCheck() {}

    public static void main(String[] args) {
        long[] edges = {0, 1, 2, 9, 10, 11, 99, 100, Long.MAX_VALUE - 1, Long.MAX_VALUE, Long.MIN_VALUE,
            Long.MIN_VALUE + 1, -11, -10, -9, -2, -1, 1234567890123L, 0x8000000000000005L, 0xFFFFFFFFFFFFFFF6L,
            0x7FFFFFFFFFFFFFF6L, 999999999999999999L, 1000000000000000000L, -8446744073709551616L};
        Random random = new Random(23);
        long[] values = new long[edges.length + 200_000];
        System.arraycopy(edges, 0, values, 0, edges.length);
        for (int i = edges.length; i < values.length; i++) {
            int bits = random.nextInt(65);   // small and large magnitudes alike
            values[i] = bits == 64 ? random.nextLong() : random.nextLong() >>> (64 - Math.max(bits, 1));
        }
        for (long v : values) {
            String expected = Long.toUnsignedString(v);
            check(expected.equals(Unsigned.toString(v)), "toString(" + v + ") = " + Unsigned.toString(v));
            check(Unsigned.parse(expected) == v, "parse(" + expected + ")");
            check(Unsigned.parse("+" + expected) == Long.parseUnsignedLong("+" + expected), "parse(+" + expected + ")");
        }
        for (long a : edges) {
            for (long b : edges) {
                check(Integer.signum(Unsigned.compare(a, b)) == Integer.signum(Long.compareUnsigned(a, b)),
                      "compare(" + a + ", " + b + ")");
            }
        }
        for (int i = 0; i + 1 < values.length; i++) {
            check(Integer.signum(Unsigned.compare(values[i], values[i + 1]))
                  == Integer.signum(Long.compareUnsigned(values[i], values[i + 1])), "compare at " + i);
        }
        String[] bad = {"", "+", "-1", "18446744073709551616", "18446744073709551620", "99999999999999999999",
            "1 ", " 1", "1a", "0x10", "++1", "1844674407370955161600"};
        for (String s : bad) {
            boolean jdkRefuses = refuses(s, true);
            check(jdkRefuses, "the JDK accepts '" + s + "'");
            check(refuses(s, false), "parse accepts '" + s + "'");
        }
        check(Unsigned.parse("18446744073709551615") == -1L, "parse(2^64 - 1)");
        check(Unsigned.parse("00018446744073709551615") == -1L, "parse with leading zeros");
        System.out.println("unsigned ok: " + values.length + " values");
    }

    private static boolean refuses(String s, boolean jdk) {
        try {
            if (jdk) {
                Long.parseUnsignedLong(s);
            } else {
                Unsigned.parse(s);
            }
            return false;
        } catch (NumberFormatException e) {
            return true;
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAIL: " + what);
            System.exit(1);
        }
    }
}
