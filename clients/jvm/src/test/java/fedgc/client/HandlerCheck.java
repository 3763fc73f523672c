package fedgc.client;

import fedgc.supernode.Array;
import fedgc.supernode.ArrayRecord;
import fedgc.supernode.ConfigRecord;
import fedgc.supernode.Inflatable;
import fedgc.supernode.Json;
import fedgc.supernode.Message;
import fedgc.supernode.Metadata;
import fedgc.supernode.NodeContext;
import fedgc.supernode.RecordDict;

import fedgc.compress.Tensor;
import fedgc.wire.Codec;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Checks of {@link FedgcHandler} without a SuperLink (run by tests/test_jvm_e2e.py):
 * {@code downlink FILE}: the replica digests and the compressed download of tests/vectors/downlink
 * equal Python's bit for bit (FILE: those vectors in one JSON, the float32 values as their bit
 * patterns, since the client's JSON reader takes integers only); {@code downloads FILE}: compressed
 * downloads made by fedgc's server code ({@code cases}: each {@code replica}, {@code model-delta},
 * {@code downlink-base}, {@code new_replica}, {@code downlink-digest}, as the vectors), blob version 1
 * or 3, applied bit for bit; {@code refuse DATA_DIR}: messages the client must
 * refuse get a one-line error reply naming the reason; {@code wire DATA_DIR OUT}: the wire versions the
 * census answer declares (with and without {@code wire-versions=1}), an int8 round's update (written to
 * OUT for Python to decode), and what a version-1-only node refuses; {@code replies DATA_DIR OUT}: one
 * round per value dtype (int8, int4, sign, fp32; fp32 again on a version-1-only node), each reply
 * message deflated as the SuperNode pushes it (OUT/NAME/objects/ID, its root id in OUT/NAME/root) for
 * Python to inflate and compare with what its ClientApp writes; {@code inflated DIR}: downloads Python
 * deflated (DIR/objects/ID; DIR/manifest.json: {@code cases}, each a {@code root} message id, a
 * {@code replica}, and {@code new_replica} or {@code refuse}, the text the refusal must hold),
 * inflated by the SDK and applied to the replica. Prints one line per failure; exit 1 if any.
 */
public final class HandlerCheck {
    private HandlerCheck() {}

    static int failures = 0;

    static void check(boolean ok, String what) {
        if (!ok) {
            failures++;
            System.out.println("FAIL " + what);
        }
    }

    public static void main(String[] args) throws Exception {
        if ("downlink".equals(args[0])) {
            downlink(new File(args[1]));
        } else if ("refuse".equals(args[0])) {
            refuse(new File(args[1]));
        } else if ("downloads".equals(args[0])) {
            for (Object c : (List<?>) json(new File(args[1])).get("cases")) {
                download(castMap(c), "case " + ((Map<?, ?>) c).get("name"));
            }
        } else if ("wire".equals(args[0])) {
            wire(new File(args[1]), new File(args[2]));
        } else if ("replies".equals(args[0])) {
            replies(new File(args[1]), new File(args[2]));
        } else if ("inflated".equals(args[0])) {
            inflated(new File(args[1]));
        } else {
            throw new IllegalArgumentException("unknown command " + args[0]);
        }
        System.out.println(failures == 0 ? "ok" : failures + " failures");
        System.exit(failures == 0 ? 0 : 1);
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> json(File file) throws Exception {
        return (Map<String, Object>) Json.parse(new String(Files.readAllBytes(file.toPath()), StandardCharsets.UTF_8));
    }

    @SuppressWarnings("unchecked")
    static LinkedHashMap<String, Tensor> weights(Object object) {
        LinkedHashMap<String, Tensor> out = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : ((Map<String, Object>) object).entrySet()) {
            Map<String, Object> w = (Map<String, Object>) e.getValue();
            List<Object> shape = (List<Object>) w.get("shape");
            List<Object> values = (List<Object>) w.get("values");
            long[] s = new long[shape.size()];
            for (int i = 0; i < s.length; i++) {
                s[i] = ((Number) shape.get(i)).longValue();
            }
            float[] v = new float[values.size()];
            for (int i = 0; i < v.length; i++) {
                v[i] = Float.intBitsToFloat((int) ((Number) values.get(i)).longValue());
            }
            out.put(e.getKey(), new Tensor(s, v));
        }
        return out;
    }

    static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static void downlink(File file) throws Exception {
        Map<String, Object> vectors = json(file);
        for (Object c : (List<Object>) vectors.get("digest")) {
            Map<String, Object> k = (Map<String, Object>) c;
            String got = FedgcHandler.digest(weights(k.get("weights")));
            check(got.equals(k.get("digest")), "digest " + got + " != " + k.get("digest"));
        }
        Map<String, Object> reset = (Map<String, Object>) vectors.get("reset");
        check(FedgcHandler.digest(weights(reset.get("arrays"))).equals(reset.get("digest")), "reset digest");

        Map<String, Object> delta = (Map<String, Object>) vectors.get("delta");
        download(delta, "delta");
        ConfigRecord config = new ConfigRecord();
        RecordDict content = new RecordDict();
        content.put("model-delta", Codec.toRecord(hex((String) delta.get("model-delta"))));
        config.put("downlink-base", delta.get("downlink-base"));
        config.put("downlink-digest", delta.get("downlink-digest"));

        // A wrong base digest, and a download whose result does not match: refused, replica unchanged.
        FedgcState other = new FedgcState();
        other.replica = weights(delta.get("replica"));
        config.put("downlink-base", "0000000000000000");
        refused(() -> new FedgcHandler().download(content, config, other), "is not the download's base");
        config.put("downlink-base", delta.get("downlink-base"));
        config.put("downlink-digest", "0000000000000000");
        refused(() -> new FedgcHandler().download(content, config, other), "does not match the server's digest");
        check(FedgcHandler.digest(other.replica).equals(delta.get("downlink-base")), "a refused download changed the replica");
        FedgcState none = new FedgcState();
        refused(() -> new FedgcHandler().download(content, config, none), "holds no replica");
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> castMap(Object o) {
        return (Map<String, Object>) o;
    }

    /** One compressed download applied to its replica: the new replica bit for bit, and its digest. */
    static void download(Map<String, Object> delta, String label) throws Exception {
        FedgcState state = new FedgcState();
        state.replica = weights(delta.get("replica"));
        RecordDict content = new RecordDict();
        content.put("model-delta", Codec.toRecord(hex((String) delta.get("model-delta"))));
        ConfigRecord config = new ConfigRecord();
        config.put("downlink-base", delta.get("downlink-base"));
        config.put("downlink-digest", delta.get("downlink-digest"));
        LinkedHashMap<String, Tensor> model;
        try {
            model = new FedgcHandler().download(content, config, state);
        } catch (FedgcHandler.Refused e) {
            check(false, label + ": refused: " + e.getMessage());
            return;
        }
        LinkedHashMap<String, Tensor> expected = weights(delta.get("new_replica"));
        check(new ArrayList<>(model.keySet()).equals(new ArrayList<>(expected.keySet())), label + ": the model's order");
        for (Map.Entry<String, Tensor> e : expected.entrySet()) {
            Tensor t = model.get(e.getKey());
            boolean same = t != null && Arrays.equals(t.shape, e.getValue().shape) && t.data.length == e.getValue().data.length;
            for (int i = 0; same && i < t.data.length; i++) {
                same = Float.floatToRawIntBits(t.data[i]) == Float.floatToRawIntBits(e.getValue().data[i]);
            }
            check(same, label + ": " + e.getKey() + " differs from Python's new replica");
        }
        check(FedgcHandler.digest(state.replica).equals(delta.get("downlink-digest")), label + ": the stored replica");
    }

    interface Call {
        void run() throws Exception;
    }

    static void refused(Call call, String reason) {
        try {
            call.run();
            check(false, "not refused: " + reason);
        } catch (FedgcHandler.Refused e) {
            check(e.getMessage().contains(reason), "refused with '" + e.getMessage() + "', expected '" + reason + "'");
        } catch (Exception e) {
            check(false, "raised " + e + " instead of refusing: " + reason);
        }
    }

    static ConfigRecord clientConfig() {
        ConfigRecord c = new ConfigRecord();
        c.put("version", 1L);
        c.put("model", "logreg");
        c.put("input-shape", Arrays.<Object>asList(3L));
        c.put("num-classes", 2L);
        c.put("seed", 0L);
        c.put("local-steps", 2L);
        c.put("batch-size", 2L);
        c.put("lr", 0.1);
        c.put("momentum", 0.0);
        c.put("weight-decay", 0.0);
        c.put("compressor", "dgc");
        c.put("c.value_dtype", "fp32");
        c.put("c.dense_small_tensors", true);
        c.put("c.momentum", 0.9);
        return c;
    }

    static Message train(ConfigRecord clientConfig, boolean withArrays) {
        return train(clientConfig, withArrays ? 2 : 0);
    }

    /** A train message whose logreg arrays have {@code classes} outputs (0: no arrays). */
    static Message train(ConfigRecord clientConfig, int classes) {
        Metadata m = Metadata.builder().messageType("train").messageId("m")
            .createdAt(System.currentTimeMillis() / 1000.0).ttl(3600).build();
        RecordDict content = new RecordDict();
        if (classes > 0) {
            ArrayRecord arrays = new ArrayRecord();
            arrays.put("net.1.weight", Array.ofFloat32(new float[3 * classes], classes, 3));
            arrays.put("net.1.bias", Array.ofFloat32(new float[classes], classes));
            content.put("arrays", arrays);
        }
        ConfigRecord config = new ConfigRecord();
        config.put("server-round", 1L);
        config.put("density", 0.5);
        config.put("num-clients", 2L);
        config.put("applied-rounds", new ArrayList<Object>());
        content.put("config", config);
        if (clientConfig != null) {
            content.put("client-config", clientConfig);
        }
        return new Message(m, content, null);
    }

    /** DATA_DIR holds a train.npz of 4 examples of shape (3,) with labels 0/1. */
    static void refuse(File dataDir) throws Exception {
        Map<String, Object> nodeConfig = new LinkedHashMap<>();
        nodeConfig.put("partition-id", 0L);
        NodeContext context = new NodeContext(1, 1, nodeConfig, new LinkedHashMap<String, Object>(), dataDir);
        // {client-config, the arrays' classes, what the one-line reason says (its code first)}
        Object[][] cases = {
            {null, 2, "bad-client-config: the training message has no 'client-config' record"},
            {with("version", 2L), 2, "bad-client-config: client-config version 2; this client speaks 1"},
            {with("compressor", "qsgd"), 2, "bad-client-config: compressor qsgd is not implemented by the JVM client (dgc, topk)"},
            {with("c.threshold", 0.1), 2, "bad-client-config: client-config has option threshold, which dgc in the JVM client does not read"},
            {with("model", "small_cnn"), 2, "unknown-model: client-config names a model this node does not have: small_cnn"},
            {with("input-shape", Arrays.<Object>asList(1L, 8L, 8L)), 2, "bad-arrays: net.1.weight is float32 (2, 3)"},
            {with("input-shape", Arrays.<Object>asList(3L, 1L)), 2, "data-mismatch: " },
            {with("num-classes", 1L), 1, "data-mismatch: "},
            {with("num-classes", 1L), 2, "bad-arrays: "},
            {with("c.value_dtype", "fp8"), 2, "bad-client-config: client-config c.value_dtype is fp8, not fp32, fp16, int8, int4 or sign"},
            {with("epochs", 1.0), 2, "bad-client-config: client-config needs exactly one of 'local-steps' and 'epochs'"},
        };
        FedgcHandler handler = new FedgcHandler();
        for (Object[] c : cases) {
            Message reply = handler.handle(train((ConfigRecord) c[0], (Integer) c[1]), context);
            String reason = reply.hasError() ? reply.error().reason : "(a reply with content)";
            check(reply.hasError() && reason.contains(":<'" + c[2]) && !reason.contains("\n"),
                "expected a one-line error with '" + c[2] + "', got " + reason);
        }
        check(handler.handle(train(with("num-classes", 1L), 1), context).error().reason.contains("label 1 out of range for 1 classes"),
            "a label the model cannot take");
        // A subclass with its own trainer names its models: they pass the client-config checks, are sized
        // by the shapes their arrays declare (the node's max-parameters), and reach its trainer.
        FedgcHandler own = new FedgcHandler() {
            @Override
            protected java.util.Set<String> otherModels() {
                return java.util.Collections.singleton("small_cnn");
            }

            @Override
            protected fedgc.train.Trainer trainer(fedgc.train.Dataset local, Settings settings) {
                return new fedgc.train.MlpTrainer(local);
            }
        };
        ConfigRecord ownModel = with("model", "small_cnn");
        ownModel.put("model-options", "{\"channels\": [8, 16]}");
        Message viaOwn = own.handle(train(ownModel, 2), context);
        check(viaOwn.hasContent(), "a subclass's own model reaches its trainer: " + viaOwn);
        Map<String, Object> tiny = new LinkedHashMap<>(nodeConfig);
        tiny.put("max-parameters", 7L);
        NodeContext tinyNode = new NodeContext(1, 1, tiny, new LinkedHashMap<String, Object>(), dataDir);
        Message tooLarge = own.handle(train(ownModel, 2), tinyNode);
        check(tooLarge.hasError() && tooLarge.error().reason.contains(":<'too-large: the model's arrays declare 8 parameters"),
            "a subclass's model larger than the node's max-parameters: " + tooLarge);
        Message noModel = handler.handle(train(clientConfig(), false), context);
        check(noModel.hasError() && noModel.error().reason.contains("bad-arrays: the train message has no 'arrays' record"),
            "a message without a model");
        Message good = handler.handle(train(clientConfig(), true), context);
        check(good.hasContent() && new ArrayList<>(good.content().keySet()).equals(Arrays.asList("update", "metrics"))
            && new ArrayList<>(good.content().metricRecord("metrics").keySet()).equals(Arrays.asList(
                "num-examples", "samples", "steps", "train-loss", "elements-sent", "elements-total")),
            "a good message: " + good);
        // The state persists for its run only: a restarted client of run 1 finds it, one of run 2 does not.
        FedgcState same = new FedgcHandler().state(context);
        check(same.runId == 1L && !same.memory.isEmpty() && !same.pending.isEmpty(), "a restart in the same run keeps the state");
        NodeContext run2 = new NodeContext(1, 2, nodeConfig, new LinkedHashMap<String, Object>(), dataDir);
        FedgcState other = new FedgcHandler().state(run2);
        check(other.runId == 2L && other.memory.isEmpty() && other.pending.isEmpty() && other.replica == null,
            "a new run starts with an empty state");
        // query.state, then query.restore into a fresh client: the same state, saved to its file.
        Metadata q = Metadata.builder().messageType("query.state").build();
        Message saved = handler.handle(new Message(q, new RecordDict(), null), context);
        check(saved.hasContent() && saved.content().keySet().containsAll(Arrays.asList("jvm.memory", "jvm.pending")),
            "query.state: " + saved);
        File other2 = new File(dataDir, "restored");
        check(other2.mkdir() || other2.isDirectory(), "a folder for the restored client");
        java.nio.file.Files.copy(new File(dataDir, "train.npz").toPath(), new File(other2, "train.npz").toPath(),
            java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        NodeContext restoredContext = new NodeContext(1, 1, nodeConfig, new LinkedHashMap<String, Object>(), other2);
        Metadata r = Metadata.builder().messageType("query.restore").build();
        FedgcHandler fresh = new FedgcHandler();
        Message ack = fresh.handle(new Message(r, saved.content(), null), restoredContext);
        check(ack.hasContent() && ack.content().isEmpty(), "query.restore answers an empty RecordDict");
        FedgcState before = new FedgcHandler().state(context), after = FedgcState.load(new File(other2, FedgcState.FILE_NAME));
        check(Arrays.equals(before.toBytes(), after.toBytes()), "query.restore adopts exactly the state query.state gave");
        Metadata bad = Metadata.builder().messageType("query.restore").build();
        RecordDict foreign = new RecordDict();
        foreign.put("fedgc.memory", new ArrayRecord());
        Message refusedRestore = fresh.handle(new Message(bad, foreign, null), restoredContext);
        check(refusedRestore.hasError() && refusedRestore.error().reason.contains("is not this client's state"),
            "query.restore of a state that is not this client's");

        Metadata m = Metadata.builder().messageType("evaluate").build();
        Message evaluate = handler.handle(new Message(m, new RecordDict(), null), context);
        check(evaluate.hasError() && evaluate.error().reason.contains("does not handle evaluate messages"), "evaluate");
        NodeContext noData = new NodeContext(1, 1, nodeConfig, new LinkedHashMap<String, Object>(), null);
        Message partition = new FedgcHandler().handle(queryPartition(), noData);
        check(partition.hasError() && partition.error().reason.contains("no device data"), "a node without data");
    }

    /**
     * Wire format v3 through the handler. The census answer: {@code partition-id}, {@code num-partitions},
     * {@code no-replica}, then {@code wire-versions = [1, 3]}; with {@code wire-versions=1} the answer an
     * older client gave (no {@code wire-versions}); any other value refused ({@code bad-node-config}).
     * A round with {@code c.value_dtype int8}: an update blob of version 3 (written to OUT). A
     * version-1-only node refuses int8 values and a version-3 download, each in one line.
     */
    static void wire(File dataDir, File out) throws Exception {
        Map<String, Object> nodeConfig = new LinkedHashMap<>();
        nodeConfig.put("partition-id", 0L);
        nodeConfig.put("num-partitions", 2L);
        NodeContext both = new NodeContext(1, 1, nodeConfig, new LinkedHashMap<String, Object>(), dataDir);
        Message census = new FedgcHandler().handle(queryPartition(), both);
        check(census.hasContent() && new ArrayList<>(census.content().metricRecord("partition").keySet()).equals(
                Arrays.asList("partition-id", "num-partitions", "no-replica", "wire-versions"))
            && census.content().metricRecord("partition").get("wire-versions").equals(Arrays.asList(1L, 3L)),
            "the census answer declares wire-versions [1, 3]: " + census);
        Map<String, Object> oneConfig = new LinkedHashMap<>(nodeConfig);
        oneConfig.put("wire-versions", 1L);
        NodeContext one = new NodeContext(1, 1, oneConfig, new LinkedHashMap<String, Object>(), new File(dataDir, "v1"));
        check(one.dataDir.mkdir() || one.dataDir.isDirectory(), "a folder for the version-1 node");
        Files.copy(new File(dataDir, "train.npz").toPath(), new File(one.dataDir, "train.npz").toPath(),
            java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Message older = new FedgcHandler().handle(queryPartition(), one);
        check(older.hasContent() && new ArrayList<>(older.content().metricRecord("partition").keySet()).equals(
                Arrays.asList("partition-id", "num-partitions", "no-replica")),
            "wire-versions=1: the census answer of a client before v3: " + older);
        for (Object bad : new Object[] {3L, "1", 1.0, true}) {
            Map<String, Object> badConfig = new LinkedHashMap<>(nodeConfig);
            badConfig.put("wire-versions", bad);
            NodeContext badNode = new NodeContext(1, 1, badConfig, new LinkedHashMap<String, Object>(), dataDir);
            for (Message m : new Message[] {queryPartition(), train(with("c.value_dtype", "int8"), 2)}) {
                Message reply = new FedgcHandler().handle(m, badNode);
                check(reply.hasError() && reply.error().reason.contains(":<'bad-node-config: wire-versions=")
                    && !reply.error().reason.contains("\n"), "wire-versions=" + bad + " refused: " + reply);
            }
        }
        // An int8 round: a version-3 blob (Python decodes it); fp32 stays version 1.
        FedgcHandler handler = new FedgcHandler();
        Message int8 = handler.handle(train(with("c.value_dtype", "int8"), 2), both);
        check(int8.hasContent(), "an int8 round: " + int8);
        if (int8.hasContent()) {
            // The compact form: a ConfigRecord holding the blob as its one bytes value 'blob'.
            Object update = int8.content().get("update");
            check(update instanceof ConfigRecord && ((ConfigRecord) update).keySet().equals(java.util.Collections.singleton("blob"))
                && ((ConfigRecord) update).get("blob") instanceof byte[], "the int8 update is a compact record: " + update);
            if (update instanceof ConfigRecord && ((ConfigRecord) update).get("blob") instanceof byte[]) {
                byte[] blob = (byte[]) ((ConfigRecord) update).get("blob");
                check(blob.length > 0 && blob[0] == 3, "the int8 update is a version-3 blob");
                Files.write(out.toPath(), blob);
            }
        }
        // A version-1-only node: int8 values and a v3 download refused in one line, before any work.
        Message refusedInt8 = new FedgcHandler().handle(train(with("c.value_dtype", "int8"), 2), one);
        check(refusedInt8.hasError() && refusedInt8.error().reason.contains(
            ":<'bad-client-config: client-config c.value_dtype is int8, which needs wire format version 3"),
            "a version-1 node refuses int8 values: " + refusedInt8);
        check(!new File(one.dataDir, FedgcState.FILE_NAME).exists(), "refused before any state was written");
        Message download = train(with("c.value_dtype", "fp32"), 0);
        download.content().put("model-delta", Codec.toRecord(new byte[] {3}));
        download.content().configRecord("config").put("downlink-base", "0000000000000000");
        download.content().configRecord("config").put("downlink-digest", "0000000000000000");
        Message refusedDownload = new FedgcHandler().handle(download, one);
        check(refusedDownload.hasError() && refusedDownload.error().reason.contains(
            "a wire format version 3 download, and this node speaks version 1 only"),
            "a version-1 node refuses a v3 download: " + refusedDownload);
        ConfigRecord compact = new ConfigRecord();
        compact.put("blob", new byte[] {3});
        download.content().put("model-delta", compact);
        Message refusedCompact = new FedgcHandler().handle(download, one);
        check(refusedCompact.hasError() && refusedCompact.error().reason.contains(
            "a wire format version 3 download, and this node speaks version 1 only"),
            "a version-1 node refuses a v3 download in the compact form: " + refusedCompact);
        Message fp32 = new FedgcHandler().handle(train(with("c.value_dtype", "fp32"), 2), one);
        check(fp32.hasContent() && fp32.content().get("update") instanceof ArrayRecord
            && fp32.content().arrayRecord("update").get(Codec.UPDATE_KEY).npy().raw[0] == 1,
            "a version-1 node trains an fp32 round, its update a version-1 blob in an ArrayRecord: " + fp32);
    }

    /** One round per case, each on its own node folder; each reply's objects written to OUT/NAME. */
    static void replies(File dataDir, File out) throws Exception {
        Object[][] cases = {{"int8", "int8", true}, {"int4", "int4", true}, {"sign", "sign", true},
            {"fp32", "fp32", true}, {"fp32-v1-only", "fp32", false}};
        for (Object[] c : cases) {
            String name = (String) c[0];
            Map<String, Object> nodeConfig = new LinkedHashMap<>();
            nodeConfig.put("partition-id", 0L);
            if (!(Boolean) c[2]) {
                nodeConfig.put("wire-versions", 1L);
            }
            File node = new File(dataDir, name);
            check(node.mkdir() || node.isDirectory(), "a folder for " + name);
            Files.copy(new File(dataDir, "train.npz").toPath(), new File(node, "train.npz").toPath(),
                java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            NodeContext context = new NodeContext(1, 1, nodeConfig, new LinkedHashMap<String, Object>(), node);
            Message reply = new FedgcHandler().handle(train(with("c.value_dtype", c[1]), 2), context);
            check(reply.hasContent(), name + ": a reply with content: " + reply);
            File folder = new File(out, name + "/objects");
            check(folder.mkdirs() || folder.isDirectory(), "a folder for " + name + "'s objects");
            Inflatable.Node root = Inflatable.deflate(reply);
            for (Map.Entry<String, byte[]> e : root.objects().entrySet()) {
                Files.write(new File(folder, e.getKey()).toPath(), e.getValue());
            }
            Files.write(new File(out, name + "/root").toPath(), root.id.getBytes(StandardCharsets.UTF_8));
        }
    }

    /** Downloads Python deflated, inflated by the SDK and applied (or refused) as the handler does. */
    @SuppressWarnings("unchecked")
    static void inflated(File dir) throws Exception {
        File objects = new File(dir, "objects");
        for (Object c : (List<Object>) json(new File(dir, "manifest.json")).get("cases")) {
            Map<String, Object> k = (Map<String, Object>) c;
            String label = "case " + k.get("name");
            String id = (String) k.get("root");
            Message message = Inflatable.inflateMessage(id, readTree(objects, id, new LinkedHashMap<String, byte[]>()));
            FedgcState state = new FedgcState();
            state.replica = weights(k.get("replica"));
            String before = FedgcHandler.digest(state.replica);
            LinkedHashMap<String, Tensor> model;
            try {
                model = new FedgcHandler().download(message.content(), message.content().configRecord("config"), state);
            } catch (FedgcHandler.Refused e) {
                check(k.containsKey("refuse") && e.getMessage().contains((String) k.get("refuse")),
                    label + ": refused with '" + e.getMessage() + "', expected " + (k.containsKey("refuse") ? "'" + k.get("refuse") + "'" : "no refusal"));
                check(FedgcHandler.digest(state.replica).equals(before), label + ": a refused download changed the replica");
                continue;
            }
            check(!k.containsKey("refuse"), label + ": not refused: " + k.get("refuse"));
            if (k.containsKey("new_replica")) {
                LinkedHashMap<String, Tensor> expected = weights(k.get("new_replica"));
                for (Map.Entry<String, Tensor> e : expected.entrySet()) {
                    Tensor t = model.get(e.getKey());
                    boolean same = t != null && Arrays.equals(t.shape, e.getValue().shape);
                    for (int i = 0; same && i < t.data.length; i++) {
                        same = Float.floatToRawIntBits(t.data[i]) == Float.floatToRawIntBits(e.getValue().data[i]);
                    }
                    check(same, label + ": " + e.getKey() + " differs from Python's new replica");
                }
            }
        }
    }

    /** The objects of the tree under {@code id} in DIR (DIR/ID each), every id verified. */
    static Map<String, byte[]> readTree(File dir, String id, Map<String, byte[]> out) throws java.io.IOException {
        if (out.containsKey(id)) {
            return out;
        }
        byte[] content = Files.readAllBytes(new File(dir, id).toPath());
        for (String child : Inflatable.verify(id, content).children) {
            readTree(dir, child, out);
        }
        out.put(id, content);
        return out;
    }

    static Message queryPartition() {
        Metadata m = Metadata.builder().messageType("query.partition").build();
        return new Message(m, new RecordDict(), null);
    }

    static ConfigRecord with(String key, Object value) {
        ConfigRecord c = clientConfig();
        c.put(key, value);
        return c;
    }
}
