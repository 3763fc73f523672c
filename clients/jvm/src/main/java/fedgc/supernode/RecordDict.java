package fedgc.supernode;

import java.util.LinkedHashMap;

/** Flower's {@code RecordDict}: named records, in insertion order. */
public final class RecordDict extends LinkedHashMap<String, Record> {
    private static final long serialVersionUID = 1L;

    public ArrayRecord arrayRecord(String key) {
        return (ArrayRecord) get(key);
    }

    public ConfigRecord configRecord(String key) {
        return (ConfigRecord) get(key);
    }

    public MetricRecord metricRecord(String key) {
        return (MetricRecord) get(key);
    }
}
