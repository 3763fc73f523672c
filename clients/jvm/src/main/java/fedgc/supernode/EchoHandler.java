package fedgc.supernode;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A handler whose reply can be checked exactly (the end-to-end test uses it): every float32/float64
 * array {@code x} of every ArrayRecord comes back as {@code 2x + 1} (same key, dtype and shape; other
 * dtypes come back unchanged), every ConfigRecord comes back unchanged, and a MetricRecord
 * {@code "echo"} adds {@code num-arrays}, {@code num-elements} (longs), {@code sum} (the float64 sum of
 * the float arrays' elements, in order), {@code node-id} and the lengths of the message type and group
 * id; with a {@code --node-config}, a ConfigRecord {@code "node-config"} holds it.
 */
public final class EchoHandler implements MessageHandler {
    @Override
    public Message handle(Message message, NodeContext context) {
        RecordDict out = new RecordDict();
        long arrays = 0;
        long elements = 0;
        double sum = 0;
        for (Map.Entry<String, Record> e : message.content().entrySet()) {
            if (e.getValue() instanceof ArrayRecord) {
                ArrayRecord transformed = new ArrayRecord();
                for (Map.Entry<String, Array> a : ((ArrayRecord) e.getValue()).entrySet()) {
                    Array x = a.getValue();
                    arrays++;
                    if ("float32".equals(x.dtype) && Array.STYPE_NUMPY.equals(x.stype)) {
                        float[] v = x.toFloat32();
                        for (int i = 0; i < v.length; i++) {
                            sum += v[i];
                            v[i] = 2 * v[i] + 1;
                        }
                        elements += v.length;
                        transformed.put(a.getKey(), Array.ofFloat32(v, x.shape));
                    } else if ("float64".equals(x.dtype) && Array.STYPE_NUMPY.equals(x.stype)) {
                        double[] v = x.toFloat64();
                        for (int i = 0; i < v.length; i++) {
                            sum += v[i];
                            v[i] = 2 * v[i] + 1;
                        }
                        elements += v.length;
                        transformed.put(a.getKey(), Array.ofFloat64(v, x.shape));
                    } else {
                        transformed.put(a.getKey(), x);
                    }
                }
                out.put(e.getKey(), transformed);
            } else {
                out.put(e.getKey(), e.getValue());
            }
        }
        MetricRecord metrics = new MetricRecord();
        metrics.put("num-arrays", arrays);
        metrics.put("num-elements", elements);
        metrics.put("sum", sum);
        metrics.put("node-id", Metadata.unsigned(context.nodeId));
        List<Object> lengths = new ArrayList<>();
        lengths.add((long) message.metadata.messageType.length());
        lengths.add((long) message.metadata.groupId.length());
        metrics.put("type-and-group-lengths", lengths);
        out.put("echo", metrics);
        if (!context.nodeConfig.isEmpty()) {
            ConfigRecord nodeConfig = new ConfigRecord();
            nodeConfig.putAll(context.nodeConfig);
            out.put("node-config", nodeConfig);
        }
        return Message.reply(message, out);
    }
}
