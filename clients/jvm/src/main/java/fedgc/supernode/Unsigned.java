package fedgc.supernode;

/**
 * Unsigned 64-bit helpers: what {@code Long.compareUnsigned}, {@code Long.toUnsignedString} and
 * {@code Long.parseUnsignedLong} do, which Android has only from API 26. The client keeps to API 23's
 * platform (built against {@code android-23.jar} by the build's Android check), so it uses these.
 */
public final class Unsigned {
    private Unsigned() {}

    /** {@code a} and {@code b} compared as unsigned 64-bit numbers (negative, zero or positive). */
    public static int compare(long a, long b) {
        long x = a + Long.MIN_VALUE;
        long y = b + Long.MIN_VALUE;
        return x < y ? -1 : (x == y ? 0 : 1);
    }

    /** The decimal digits of {@code v} read as an unsigned 64-bit number. */
    public static String toString(long v) {
        if (v >= 0) {
            return Long.toString(v);
        }
        long quotient = (v >>> 1) / 5;           // v / 10, unsigned: (v/2)/5 fits a signed long
        long remainder = v - quotient * 10;
        return Long.toString(quotient) + remainder;
    }

    /**
     * Parses decimal digits (no sign, as {@code Long.parseUnsignedLong} accepts an optional '+') into an
     * unsigned 64-bit number; {@link NumberFormatException} for anything else or a value over 2^64 - 1.
     */
    public static long parse(String s) {
        if (s == null) {
            throw new NumberFormatException("null");
        }
        int start = s.startsWith("+") ? 1 : 0;
        if (start == s.length()) {
            throw new NumberFormatException("For input string: \"" + s + "\"");
        }
        long value = 0;
        for (int i = start; i < s.length(); i++) {
            int digit = s.charAt(i) - '0';
            if (digit < 0 || digit > 9) {
                throw new NumberFormatException("For input string: \"" + s + "\"");
            }
            // value * 10 + digit must stay below 2^64: value <= (2^64 - 1 - digit) / 10, unsigned
            if (compare(value, divideBy10(-1L - digit)) > 0) {
                throw new NumberFormatException("String value " + s + " exceeds range of unsigned long.");
            }
            value = value * 10 + digit;
        }
        return value;
    }

    private static long divideBy10(long v) {
        return v >= 0 ? v / 10 : (v >>> 1) / 5;
    }
}
