package fedgc.supernode;

import java.io.File;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Java-side check that this client's objects are Flower's, byte for byte (run by
 * tests/test_jvm_client.py, which writes DIR with Python's flwr first):
 * {@code java -cp fedgc-client.jar:fedgc-client-tests.jar fedgc.supernode.SelfCheck DIR}.
 *
 * <p>DIR/manifest.json names the root object id of two messages Python built (one with content, one
 * carrying an error); DIR/objects/ID holds every object Python deflated. For each message this
 * (1) reads Python's objects, verifying every SHA-256 id, and inflates the message;
 * (2) deflates the inflated message again and requires the very same objects;
 * (3) builds the same message from scratch in Java (the values below, which the Python test also
 * uses) and requires the same root id. Exit 0 and "selfcheck ok" when all hold, else exit 1.
 */
public final class SelfCheck {
    private static int failures = 0;

    private SelfCheck() {}

    private static void check(boolean ok, String what) {
        if (!ok) {
            failures++;
            System.out.println("FAIL: " + what);
        }
    }

    static Metadata contentMetadata() {
        Metadata m = Metadata.builder()
            .runId(1234567890123L)
            .srcNodeId(1)
            .dstNodeId(new BigInteger("9223372036854775813").longValue()) // 2**63 + 5
            .groupId("7")
            .createdAt(1767225600.25)
            .ttl(3600.0)
            .messageType("train")
            .srcTaskId(11L)
            .build();
        return m;
    }

    /** The message Python builds in test_jvm_client.py (same keys, order and values). */
    static Message contentMessage() {
        ArrayRecord arrays = new ArrayRecord();
        float[] w = new float[6];
        for (int i = 0; i < 6; i++) {
            w[i] = i / 4f;
        }
        arrays.put("w\"1", Array.ofFloat32(w, 2, 3));
        arrays.put("ids", Array.ofInt64(new long[] {7, -8, 1L << 40}));
        arrays.put("zeros", Array.ofFloat32(new float[4000000]));
        double[] ramp = new double[1000000];
        for (int i = 0; i < ramp.length; i++) {
            ramp[i] = i * 0.5;
        }
        arrays.put("ramp", Array.ofFloat64(ramp));
        byte[] scalar = java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putDouble(3.5).array();
        arrays.put("scalar", Array.fromRaw("float64", new long[0], scalar));

        ConfigRecord config = new ConfigRecord();
        config.put("lr", 0.1);
        config.put("epochs", 3L);
        config.put("name", "fedgc \u2713 \"q\"\n");
        config.put("flag", true);
        config.put("blob", new byte[] {0, (byte) 0xff});
        config.put("floats", Arrays.<Object>asList(1.0, -2.5));
        config.put("ints", Arrays.<Object>asList(1L, -2L));
        config.put("bools", Arrays.<Object>asList(true));
        config.put("strs", Arrays.<Object>asList("a", "\u00e9"));
        config.put("blobs", Arrays.<Object>asList((Object) new byte[] {'x'}));
        config.put("big", BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE));
        config.put("empty", new ArrayList<Object>());

        MetricRecord metrics = new MetricRecord();
        metrics.put("acc", 0.9);
        metrics.put("n", 10L);
        metrics.put("hist", Arrays.<Object>asList(1L, 2L, 3L));
        metrics.put("curve", Arrays.<Object>asList(0.5, 0.25));
        metrics.put("huge", BigInteger.ONE.shiftLeft(63));

        RecordDict content = new RecordDict();
        content.put("arrays", arrays);
        content.put("config", config);
        content.put("m\u00e9triques \u2713", metrics);
        return new Message(contentMetadata(), content, null);
    }

    static Message errorMessage() {
        Metadata m = Metadata.builder()
            .runId(1234567890123L)
            .srcNodeId(new BigInteger("9223372036854775813").longValue())
            .dstNodeId(1)
            .replyToMessageId(new String(new char[32]).replace("\0", "ab"))
            .groupId("7")
            .createdAt(1767225601.5)
            .ttl(1800.0)
            .messageType("train")
            .dstTaskId(11L)
            .build();
        return new Message(m, null, new MessageError(2, "boom \u2713"));
    }

    static Map<String, byte[]> readTree(File dir, String id, Map<String, byte[]> out) throws IOException {
        if (out.containsKey(id)) {
            return out;
        }
        byte[] content = Files.readAllBytes(new File(dir, id).toPath());
        Inflatable.Head head = Inflatable.verify(id, content);
        for (String child : head.children) {
            readTree(dir, child, out);
        }
        out.put(id, content);
        return out;
    }

    static void compare(String name, Map<String, byte[]> python, Map<String, byte[]> java) {
        check(python.keySet().equals(java.keySet()), name + ": Python's object ids " + python.keySet()
            + " != Java's " + java.keySet());
        for (Map.Entry<String, byte[]> e : java.entrySet()) {
            byte[] p = python.get(e.getKey());
            if (p == null) {
                String head = new String(e.getValue(), 0, Math.min(200, e.getValue().length), StandardCharsets.ISO_8859_1);
                System.out.println("  Java-only object " + e.getKey() + ": " + head.replace("\0", "\\0"));
            } else {
                check(Arrays.equals(p, e.getValue()), name + ": object " + e.getKey() + " differs");
            }
        }
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        Map<String, Object> manifest = (Map<String, Object>) Json.parse(
            new String(Files.readAllBytes(new File(dir, "manifest.json").toPath()), StandardCharsets.UTF_8));
        File objects = new File(dir, "objects");
        Map<String, Message> built = new LinkedHashMap<>();
        built.put("content", contentMessage());
        built.put("error", errorMessage());
        for (Map.Entry<String, Message> e : built.entrySet()) {
            String name = e.getKey();
            String root = (String) manifest.get(name);
            Map<String, byte[]> python = readTree(objects, root, new LinkedHashMap<String, byte[]>());
            Message inflated = Inflatable.inflateMessage(root, python);
            check(root.equals(inflated.metadata.messageId), name + ": message_id is not the root id");
            Map<String, byte[]> again = Inflatable.deflate(inflated).objects();
            compare(name + " (inflated, deflated again)", python, again);
            Inflatable.Node fromScratch = Inflatable.deflate(e.getValue());
            check(root.equals(fromScratch.id), name + ": Java built id " + fromScratch.id + ", Python " + root);
            compare(name + " (built in Java)", python, fromScratch.objects());
            System.out.println(name + ": " + python.size() + " objects, root " + root);
        }
        // A few values read back from Python's objects.
        Message m = Inflatable.inflateMessage((String) manifest.get("content"),
            readTree(objects, (String) manifest.get("content"), new LinkedHashMap<String, byte[]>()));
        ConfigRecord config = m.content().configRecord("config");
        check(BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE).equals(config.get("big")), "config big");
        check("fedgc \u2713 \"q\"\n".equals(config.get("name")), "config name");
        check(Long.valueOf(3).equals(config.get("epochs")), "config epochs");
        check(((List<Object>) config.get("empty")).isEmpty(), "config empty list");
        check(Arrays.equals(new float[] {0, .25f, .5f, .75f, 1, 1.25f}, m.content().arrayRecord("arrays").get("w\"1").toFloat32()), "w values");
        check(Arrays.equals(new long[] {2, 3}, m.content().arrayRecord("arrays").get("w\"1").shape), "w shape");
        check(m.content().arrayRecord("arrays").get("ramp").toFloat64()[999999] == 499999.5, "ramp values");
        Message err = Inflatable.inflateMessage((String) manifest.get("error"),
            readTree(objects, (String) manifest.get("error"), new LinkedHashMap<String, byte[]>()));
        check(err.hasError() && err.error().code == 2 && "boom \u2713".equals(err.error().reason), "error message");
        // The .npy writer against numpy's bytes.
        Map<String, Object> npy = (Map<String, Object>) manifest.get("npy");
        for (Map.Entry<String, Object> e : npy.entrySet()) {
            Array a = m.content().arrayRecord("arrays").get(e.getKey());
            Npy.Decoded d = a.npy();
            byte[] again = Npy.encode(d.dtype, d.shape, d.raw);
            check(Arrays.equals(a.data, again), "npy header of " + e.getKey() + " differs from numpy's");
        }
        // The Android-safe base64 against the JDK's.
        java.util.Random random = new java.util.Random(7);
        for (int n = 0; n < 70; n++) {
            byte[] data = new byte[n];
            random.nextBytes(data);
            String jdk = java.util.Base64.getEncoder().encodeToString(data);
            check(jdk.equals(B64.encode(data)), "base64 encode of " + n + " bytes");
            check(Arrays.equals(data, B64.decode(jdk)), "base64 decode of " + n + " bytes");
            check(Arrays.equals(data, java.util.Base64.getMimeDecoder().decode(java.util.Base64.getMimeEncoder().encodeToString(data)))
                && Arrays.equals(data, B64.decode(java.util.Base64.getMimeEncoder().encodeToString(data))), "base64 MIME decode");
        }
        if (failures > 0) {
            System.out.println("selfcheck FAILED: " + failures + " failure(s)");
            System.exit(1);
        }
        System.out.println("selfcheck ok: Java's object ids and bytes equal Python's");
    }
}
