package fedgc.supernode;

import java.util.LinkedHashMap;

/**
 * Flower's {@code ConfigRecord}, in insertion order. Values: {@link Boolean}, {@link Long} (or
 * Integer), {@link Double} (or Float), {@link String}, {@code byte[]}, a {@link java.math.BigInteger}
 * for an unsigned 64-bit value, or a {@link java.util.List} of one of those. Values read from the wire
 * are Boolean, Long, BigInteger (uint64), Double, String, byte[] or lists of them.
 */
public final class ConfigRecord extends LinkedHashMap<String, Object> implements Record {
    private static final long serialVersionUID = 1L;
}
