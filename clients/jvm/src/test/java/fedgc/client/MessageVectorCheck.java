package fedgc.client;

import fedgc.supernode.Array;
import fedgc.supernode.ArrayRecord;
import fedgc.supernode.ConfigRecord;
import fedgc.supernode.Json;
import fedgc.supernode.Message;
import fedgc.supernode.Metadata;
import fedgc.supernode.MetricRecord;
import fedgc.supernode.NodeContext;
import fedgc.supernode.RecordDict;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The hostile train messages of tests/client_vectors/client_messages.json through {@link FedgcHandler#handle}
 * (run by tests/test_jvm_client_messages.py): {@code MessageVectorCheck CASES DATA_DIR}, where CASES
 * is one JSON holding the base message ({@code client-config}, {@code config}, {@code arrays} as
 * float32 bit patterns, {@code node-config}) and the vectors, floats as {@code {"float_bits": N}}
 * (the client's JSON reader takes integers only), and DATA_DIR holds the node's {@code train.npz}.
 * Each vector changes one key of one record of the base message ({@code {"delete": true}},
 * {@code {"string_runs": [[text, n], ...]}}, {@code {"list_runs": [[item, n], ...]}} as the vectors
 * file encodes them; {@code "without"}: a key of that record removed as well), or gives the message's whole {@code arrays} record ({@code "arrays"}: a list of
 * {@code [name, dtype, shape, stype, hex data]}, null for none), or a state the node restores first
 * ({@code "state"}: record name to such a list, sent as {@code query.restore}); each is answered by a
 * fresh handler with no stored state. One JSON line per
 * vector: {@code name}, {@code outcome} ({@code "reply"}, {@code "refuse:<reason>"}, or
 * {@code "raised:<exception>"}), {@code ms}, {@code detail} (the error reply's text).
 */
public final class MessageVectorCheck {
    private MessageVectorCheck() {}

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        Map<String, Object> cases = (Map<String, Object>) Json.parse(
            new String(Files.readAllBytes(new File(args[0]).toPath()), StandardCharsets.UTF_8));
        File dataDir = new File(args[1]);
        Map<String, Object> nodeConfig = (Map<String, Object>) decode(cases.get("node-config"));
        NodeContext context = new NodeContext(1, 1, nodeConfig, new LinkedHashMap<String, Object>(), dataDir);
        for (Object v : (List<Object>) cases.get("vectors")) {
            Map<String, Object> vector = (Map<String, Object>) v;
            String name = (String) vector.get("name");
            ConfigRecord clientConfig = record((Map<String, Object>) cases.get("client-config"));
            ConfigRecord config = record((Map<String, Object>) cases.get("config"));
            ConfigRecord edited = "config".equals(vector.get("record")) ? config : clientConfig;
            String key = (String) vector.get("key");
            Object value = vector.get("value");
            if (key == null) {
                // an arrays or state vector: the records as given
            } else if (value instanceof Map && Boolean.TRUE.equals(((Map<String, Object>) value).get("delete"))) {
                edited.remove(key);
            } else {
                edited.put(key, decode(value));
            }
            if (vector.get("without") instanceof String) { // e.g. epochs asked for instead of local-steps
                edited.remove((String) vector.get("without"));
            }
            RecordDict content = new RecordDict();
            if (!vector.containsKey("arrays")) {
                content.put("arrays", arrays((Map<String, Object>) cases.get("arrays")));
            } else if (vector.get("arrays") != null) {
                content.put("arrays", explicit((List<Object>) vector.get("arrays")));
            }
            content.put("config", config);
            content.put("client-config", clientConfig);
            Metadata m = Metadata.builder().messageType("train").messageId("m1")
                .createdAt(System.currentTimeMillis() / 1000.0).ttl(3600).build();
            new File(dataDir, FedgcState.FILE_NAME).delete();
            String outcome, detail = "";
            long t0 = System.nanoTime();
            try {
                FedgcHandler handler = new FedgcHandler();
                Message reply = null;
                if (vector.get("state") != null) { // restored first, as the server does on --resume
                    RecordDict state = new RecordDict();
                    for (Map.Entry<String, Object> r : ((Map<String, Object>) vector.get("state")).entrySet()) {
                        state.put(r.getKey(), explicit((List<Object>) r.getValue()));
                    }
                    Metadata q = Metadata.builder().messageType("query.restore").messageId("r1").build();
                    reply = handler.handle(new Message(q, state, null), context);
                }
                if (reply == null || !reply.hasError()) {
                    reply = handler.handle(new Message(m, content, null), context);
                }
                if (reply.hasError()) {
                    detail = reply.error().reason;
                    outcome = "refuse:" + code(detail);
                } else {
                    RecordDict out = reply.content();
                    boolean complete = (out.get("update") instanceof ArrayRecord || out.get("update") instanceof ConfigRecord)
                        && out.get("metrics") instanceof MetricRecord
                        && out.metricRecord("metrics").get("num-examples") != null;
                    outcome = complete ? "reply" : "incomplete reply";
                    detail = complete ? "num-examples " + out.metricRecord("metrics").get("num-examples") : String.valueOf(out);
                }
            } catch (Throwable e) { // anything but an error reply: the test fails on it
                outcome = "raised:" + e.getClass().getName();
                detail = String.valueOf(e.getMessage());
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            StringBuilder line = new StringBuilder("{\"name\": ");
            Json.string(line, name);
            line.append(", \"outcome\": ");
            Json.string(line, outcome);
            line.append(", \"ms\": ").append(ms).append(", \"detail\": ");
            Json.string(line, detail.length() > 300 ? detail.substring(0, 300) : detail);
            System.out.println(line.append('}'));
        }
    }

    /** The code at the start of the refusal's text inside Flower's {@code "<class '...'>:<'TEXT'>"}. */
    static String code(String reason) {
        int start = reason.indexOf(":<'");
        String text = start >= 0 ? reason.substring(start + 3) : reason;
        int colon = text.indexOf(": ");
        return colon > 0 && text.substring(0, colon).matches("[a-z-]+") ? text.substring(0, colon) : "(no code)";
    }

    static ConfigRecord record(Map<String, Object> values) {
        ConfigRecord out = new ConfigRecord();
        for (Map.Entry<String, Object> e : values.entrySet()) {
            out.put(e.getKey(), decode(e.getValue()));
        }
        return out;
    }

    /** A value as the JVM client receives it off the wire: Long, Double, Boolean, String, or a List of those. */
    @SuppressWarnings("unchecked")
    static Object decode(Object value) {
        if (value instanceof List) {
            List<Object> out = new ArrayList<>();
            for (Object item : (List<Object>) value) {
                out.add(decode(item));
            }
            return out;
        }
        if (!(value instanceof Map)) {
            return value;
        }
        Map<String, Object> map = (Map<String, Object>) value;
        if (map.containsKey("float_bits")) {
            return Double.longBitsToDouble((Long) map.get("float_bits"));
        }
        if (map.containsKey("string_runs")) {
            StringBuilder s = new StringBuilder();
            for (Object run : (List<Object>) map.get("string_runs")) {
                List<Object> r = (List<Object>) run;
                for (long i = 0; i < (Long) r.get(1); i++) {
                    s.append((String) r.get(0));
                }
            }
            return s.toString();
        }
        if (map.containsKey("list_runs")) {
            List<Object> out = new ArrayList<>();
            for (Object run : (List<Object>) map.get("list_runs")) {
                List<Object> r = (List<Object>) run;
                for (long i = 0; i < (Long) r.get(1); i++) {
                    out.add(decode(r.get(0)));
                }
            }
            return out;
        }
        Map<String, Object> out = new LinkedHashMap<>(); // a plain map (the node config)
        for (Map.Entry<String, Object> e : map.entrySet()) {
            out.put(e.getKey(), decode(e.getValue()));
        }
        return out;
    }

    /** An ArrayRecord as given: {@code [[name, dtype, shape, stype, data as hex], ...]}, whatever the data holds. */
    @SuppressWarnings("unchecked")
    static ArrayRecord explicit(List<Object> arrays) {
        ArrayRecord out = new ArrayRecord();
        for (Object a : arrays) {
            List<Object> fields = (List<Object>) a;
            List<Object> shape = (List<Object>) fields.get(2);
            long[] s = new long[shape.size()];
            for (int i = 0; i < s.length; i++) {
                s[i] = (Long) shape.get(i);
            }
            out.put((String) fields.get(0), new Array((String) fields.get(1), s, (String) fields.get(3),
                HandlerCheck.hex((String) fields.get(4))));
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static ArrayRecord arrays(Map<String, Object> weights) {
        ArrayRecord out = new ArrayRecord();
        for (Map.Entry<String, Object> e : weights.entrySet()) {
            Map<String, Object> w = (Map<String, Object>) e.getValue();
            List<Object> shape = (List<Object>) w.get("shape"), values = (List<Object>) w.get("values");
            long[] s = new long[shape.size()];
            for (int i = 0; i < s.length; i++) {
                s[i] = (Long) shape.get(i);
            }
            float[] f = new float[values.size()];
            for (int i = 0; i < f.length; i++) {
                f[i] = Float.intBitsToFloat((int) (long) (Long) values.get(i));
            }
            out.put(e.getKey(), Array.ofFloat32(f, s));
        }
        return out;
    }
}
