package fedgc.cli.check;

import fedgc.client.FedgcHandler;
import fedgc.supernode.Message;
import fedgc.supernode.MetricRecord;
import fedgc.supernode.NodeContext;
import fedgc.supernode.RecordDict;

import java.util.Arrays;

/**
 * A hostile node for tests/test_jvm_census_hostile.py (test code, not in the client jar): it answers
 * the server's partition query ({@code query.partition}) with the {@code partition-id} that
 * {@code $FEDGC_HOSTILE_PARTITION} names ({@code nan}, {@code inf}, {@code -inf}, {@code list}, or a
 * number) instead of its own, and handles every other message as fedgc's handler does.
 */
public final class HostilePartitionHandler extends FedgcHandler {
    private final String value = System.getenv("FEDGC_HOSTILE_PARTITION");

    @Override
    public Message handle(Message message, NodeContext context) throws Exception {
        if (!PARTITION_QUERY.equals(message.metadata.messageType)) {
            return super.handle(message, context);
        }
        MetricRecord record = new MetricRecord();
        record.put("partition-id", partitionId());
        record.put("num-partitions", 3L);
        RecordDict content = new RecordDict();
        content.put("partition", record);
        System.err.println("hostile: answered the partition query with " + value);
        System.err.flush();
        return Message.reply(message, content);
    }

    private Object partitionId() {
        switch (value == null ? "nan" : value) {
            case "nan":
                return Double.NaN;
            case "inf":
                return Double.POSITIVE_INFINITY;
            case "-inf":
                return Double.NEGATIVE_INFINITY;
            case "list":
                return Arrays.asList(1L, 2L);
            default:
                return value.contains(".") || value.contains("e") ? (Object) Double.parseDouble(value) : (Object) Long.parseLong(value);
        }
    }
}
