package fedgc.supernode;

import java.util.LinkedHashMap;

/**
 * Flower's {@code MetricRecord}, in insertion order. Values: {@link Long} (or Integer), {@link Double}
 * (or Float), a {@link java.math.BigInteger} for an unsigned 64-bit value, or a {@link java.util.List}
 * of one of those.
 */
public final class MetricRecord extends LinkedHashMap<String, Object> implements Record {
    private static final long serialVersionUID = 1L;
}
