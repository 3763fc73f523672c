package fedgc.supernode;

import java.util.LinkedHashMap;

/** Flower's {@code ArrayRecord}: named {@link Array}s, in insertion order. */
public final class ArrayRecord extends LinkedHashMap<String, Array> implements Record {
    private static final long serialVersionUID = 1L;
}
