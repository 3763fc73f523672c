package fedgc.supernode;

/** One of Flower's records held by a {@link RecordDict}: {@link ArrayRecord}, {@link ConfigRecord}, {@link MetricRecord}. */
public interface Record {}
