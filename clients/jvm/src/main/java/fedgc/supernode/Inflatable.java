package fedgc.supernode;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import flwr.proto.ErrorOuterClass;
import flwr.proto.MessageOuterClass;
import flwr.proto.Recorddict;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Flower's content-addressed objects ({@code flwr.supercore.inflatable}), byte for byte.
 *
 * <p>An object is {@code "<Type> <child id>,<child id>,... <body length>" + 0x00 + body}; its id is
 * the SHA-256 hex digest of those bytes. Message → RecordDict → ArrayRecord / ConfigRecord /
 * MetricRecord; ArrayRecord → Array → ArrayChunk (the array data, cut into chunks of at most
 * {@link #maxChunkSize} bytes, 5 MiB as in Flower). Bodies: Message, ConfigRecord and MetricRecord
 * are protobuf; RecordDict, ArrayRecord and Array are Python {@code json.dumps} output; ArrayChunk is
 * raw bytes.
 */
public final class Inflatable {
    public static final String MESSAGE = "Message";
    public static final String RECORD_DICT = "RecordDict";
    public static final String ARRAY_RECORD = "ArrayRecord";
    public static final String CONFIG_RECORD = "ConfigRecord";
    public static final String METRIC_RECORD = "MetricRecord";
    public static final String ARRAY = "Array";
    public static final String ARRAY_CHUNK = "ArrayChunk";
    private static final List<String> TYPES = Arrays.asList(
        MESSAGE, RECORD_DICT, ARRAY_RECORD, CONFIG_RECORD, METRIC_RECORD, ARRAY, ARRAY_CHUNK);
    private static final BigInteger INT64_MAX = BigInteger.valueOf(Long.MAX_VALUE);

    /** Flower's {@code FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE} (same environment variable, same default). */
    public static final int maxChunkSize = chunkSizeFromEnv();

    private Inflatable() {}

    private static int chunkSizeFromEnv() {
        String v = System.getenv("FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE");
        return v == null || v.trim().isEmpty() ? 5242880 : Integer.parseInt(v.trim());
    }

    /** A deflated object and its (unique, ordered) children: one node of a message's object tree. */
    public static final class Node {
        public final String id;
        public final String type;
        public final byte[] content;
        public final List<Node> children;

        Node(String type, byte[] content, List<Node> children) {
            this.id = sha256Hex(content);
            this.type = type;
            this.content = content;
            this.children = Collections.unmodifiableList(children);
        }

        /** Flower's {@code ObjectTree} of this node. */
        public MessageOuterClass.ObjectTree tree() {
            MessageOuterClass.ObjectTree.Builder b = MessageOuterClass.ObjectTree.newBuilder().setObjectId(id);
            for (Node child : children) {
                b.addChildren(child.tree());
            }
            return b.build();
        }

        /** Every object of this tree, id → content, children before parents (Flower's post-order). */
        public Map<String, byte[]> objects() {
            Map<String, byte[]> out = new LinkedHashMap<>();
            collect(this, out);
            return out;
        }

        private static void collect(Node node, Map<String, byte[]> out) {
            for (Node child : node.children) {
                collect(child, out);
            }
            if (!out.containsKey(node.id)) {
                out.put(node.id, node.content);
            }
        }
    }

    public static String sha256Hex(byte[] content) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(content);
            char[] hex = new char[64];
            String digits = "0123456789abcdef";
            for (int i = 0; i < 32; i++) {
                hex[2 * i] = digits.charAt((digest[i] >> 4) & 0xf);
                hex[2 * i + 1] = digits.charAt(digest[i] & 0xf);
            }
            return new String(hex);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 unavailable", e);
        }
    }

    static byte[] withHeader(String type, List<Node> children, byte[] body, int bodyOffset, int bodyLength) {
        StringBuilder head = new StringBuilder(type).append(' ');
        for (int i = 0; i < children.size(); i++) {
            if (i > 0) {
                head.append(',');
            }
            head.append(children.get(i).id);
        }
        head.append(' ').append(bodyLength);
        byte[] h = head.toString().getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[h.length + 1 + bodyLength];
        System.arraycopy(h, 0, out, 0, h.length);
        out[h.length] = 0;
        System.arraycopy(body, bodyOffset, out, h.length + 1, bodyLength);
        return out;
    }

    static byte[] withHeader(String type, List<Node> children, byte[] body) {
        return withHeader(type, children, body, 0, body.length);
    }

    // ---------------------------------------------------------------- deflate

    /** The object tree of a message (its {@code message_id} is not part of it: the root id is). */
    public static Node deflate(Message message) {
        List<Node> children = new ArrayList<>();
        MessageOuterClass.Message.Builder body = MessageOuterClass.Message.newBuilder()
            .setMetadata(Protos.metadata(message.metadata).toBuilder().setMessageId(""));
        if (message.hasContent()) {
            children.add(deflate(message.content()));
        } else {
            body.setError(Protos.error(message.error()));
        }
        return new Node(MESSAGE, withHeader(MESSAGE, children, body.build().toByteArray()), children);
    }

    static Node deflate(RecordDict recordDict) {
        Map<String, String> refs = new LinkedHashMap<>();
        Map<String, Node> unique = new LinkedHashMap<>();
        for (Map.Entry<String, Record> e : recordDict.entrySet()) {
            Node child = deflateRecord(e.getValue());
            refs.put(e.getKey(), child.id);
            if (!unique.containsKey(child.id)) {
                unique.put(child.id, child);
            }
        }
        List<Node> children = new ArrayList<>(unique.values());
        byte[] body = Json.stringMap(refs).getBytes(StandardCharsets.UTF_8);
        return new Node(RECORD_DICT, withHeader(RECORD_DICT, children, body), children);
    }

    static Node deflateRecord(Record record) {
        if (record instanceof ArrayRecord) {
            return deflate((ArrayRecord) record);
        }
        if (record instanceof ConfigRecord) {
            byte[] body = Protos.configRecord((ConfigRecord) record).toByteArray();
            return new Node(CONFIG_RECORD, withHeader(CONFIG_RECORD, Collections.<Node>emptyList(), body),
                Collections.<Node>emptyList());
        }
        if (record instanceof MetricRecord) {
            byte[] body = Protos.metricRecord((MetricRecord) record).toByteArray();
            return new Node(METRIC_RECORD, withHeader(METRIC_RECORD, Collections.<Node>emptyList(), body),
                Collections.<Node>emptyList());
        }
        throw new IllegalArgumentException("unsupported record type: " + record.getClass().getName());
    }

    static Node deflate(ArrayRecord arrayRecord) {
        Map<String, String> refs = new LinkedHashMap<>();
        Map<String, Node> unique = new LinkedHashMap<>();
        for (Map.Entry<String, Array> e : arrayRecord.entrySet()) {
            Node child = deflate(e.getValue());
            refs.put(e.getKey(), child.id);
            if (!unique.containsKey(child.id)) {
                unique.put(child.id, child);
            }
        }
        List<Node> children = new ArrayList<>(unique.values());
        byte[] body = Json.stringMap(refs).getBytes(StandardCharsets.UTF_8);
        return new Node(ARRAY_RECORD, withHeader(ARRAY_RECORD, children, body), children);
    }

    static Node deflate(Array array) {
        Map<String, Node> unique = new LinkedHashMap<>();
        List<String> chunkIds = new ArrayList<>();
        List<Node> none = Collections.emptyList();
        for (int start = 0; start < array.data.length; start += maxChunkSize) {
            int length = Math.min(maxChunkSize, array.data.length - start);
            Node chunk = new Node(ARRAY_CHUNK, withHeader(ARRAY_CHUNK, none, array.data, start, length), none);
            chunkIds.add(chunk.id);
            if (!unique.containsKey(chunk.id)) {
                unique.put(chunk.id, chunk);
            }
        }
        List<String> uniqueIds = new ArrayList<>(unique.keySet());
        StringBuilder json = new StringBuilder("{\"dtype\": ");
        Json.string(json, array.dtype);
        json.append(", \"shape\": [");
        for (int i = 0; i < array.shape.length; i++) {
            json.append(i > 0 ? ", " : "").append(array.shape[i]);
        }
        json.append("], \"stype\": ");
        Json.string(json, array.stype);
        json.append(", \"arraychunk_ids\": [");
        for (int i = 0; i < chunkIds.size(); i++) {
            json.append(i > 0 ? ", " : "").append(uniqueIds.indexOf(chunkIds.get(i)));
        }
        json.append("]}");
        List<Node> children = new ArrayList<>(unique.values());
        byte[] body = json.toString().getBytes(StandardCharsets.UTF_8);
        return new Node(ARRAY, withHeader(ARRAY, children, body), children);
    }

    // ---------------------------------------------------------------- object heads

    /** The parsed head of an object: type, child ids and where the body starts. */
    public static final class Head {
        public final String type;
        public final List<String> children;
        public final int bodyOffset;

        Head(String type, List<String> children, int bodyOffset) {
            this.type = type;
            this.children = children;
            this.bodyOffset = bodyOffset;
        }
    }

    /** Parse and validate an object's head as Flower's {@code validate_object_content} does. */
    public static Head head(byte[] content) {
        int divider = -1;
        for (int i = 0; i < content.length; i++) {
            if (content[i] == 0) {
                divider = i;
                break;
            }
        }
        if (divider < 0) {
            throw new IllegalArgumentException("object head and body could not be split");
        }
        String head = new String(content, 0, divider, StandardCharsets.UTF_8);
        String[] parts = head.split(" ", -1);
        if (parts.length != 3) {
            throw new IllegalArgumentException("unexpected object head: " + head);
        }
        if (!TYPES.contains(parts[0])) {
            throw new IllegalArgumentException("object of type " + parts[0] + " is not supported");
        }
        List<String> children = new ArrayList<>();
        if (!parts[1].isEmpty()) {
            for (String id : parts[1].split(",", -1)) {
                if (!id.matches("[0-9a-fA-F]{64}")) {
                    throw new IllegalArgumentException("invalid child object id " + id);
                }
                children.add(id);
            }
        }
        long bodyLength = Long.parseLong(parts[2]);
        if (bodyLength != content.length - divider - 1) {
            throw new IllegalArgumentException("object body is " + (content.length - divider - 1)
                + " bytes, its head says " + bodyLength);
        }
        return new Head(parts[0], children, divider + 1);
    }

    /** Check an object pulled under {@code id}: its SHA-256 and its head. */
    public static Head verify(String id, byte[] content) {
        String actual = sha256Hex(content);
        if (!actual.equals(id)) {
            throw new IllegalArgumentException("object " + id + " has content with SHA-256 " + actual);
        }
        return head(content);
    }

    // ---------------------------------------------------------------- inflate

    /** Rebuild a message from its objects (id → content, as pulled and verified); its message_id is {@code id}. */
    public static Message inflateMessage(String id, Map<String, byte[]> objects) {
        Head h = headOf(id, objects, MESSAGE);
        MessageOuterClass.Message proto = parse(id, objects, h, MessageOuterClass.Message.parser());
        Metadata metadata = Protos.metadata(proto.getMetadata()).withMessageId(id);
        if (proto.hasError()) {
            if (!h.children.isEmpty()) {
                throw new IllegalArgumentException("message " + id + " carries an error and children");
            }
            return new Message(metadata, null, Protos.error(proto.getError()));
        }
        if (h.children.size() != 1) {
            throw new IllegalArgumentException("message " + id + " has " + h.children.size() + " children");
        }
        return new Message(metadata, inflateRecordDict(h.children.get(0), objects), null);
    }

    static RecordDict inflateRecordDict(String id, Map<String, byte[]> objects) {
        Head h = headOf(id, objects, RECORD_DICT);
        RecordDict out = new RecordDict();
        for (Map.Entry<String, String> e : refs(id, objects, h).entrySet()) {
            String childId = e.getValue();
            String type = headOf(childId, objects, null).type;
            if (ARRAY_RECORD.equals(type)) {
                out.put(e.getKey(), inflateArrayRecord(childId, objects));
            } else if (CONFIG_RECORD.equals(type)) {
                Head ch = headOf(childId, objects, CONFIG_RECORD);
                out.put(e.getKey(), Protos.configRecord(parse(childId, objects, ch, Recorddict.ConfigRecord.parser())));
            } else if (METRIC_RECORD.equals(type)) {
                Head ch = headOf(childId, objects, METRIC_RECORD);
                out.put(e.getKey(), Protos.metricRecord(parse(childId, objects, ch, Recorddict.MetricRecord.parser())));
            } else {
                throw new IllegalArgumentException("RecordDict child " + childId + " is a " + type);
            }
        }
        return out;
    }

    static ArrayRecord inflateArrayRecord(String id, Map<String, byte[]> objects) {
        Head h = headOf(id, objects, ARRAY_RECORD);
        ArrayRecord out = new ArrayRecord();
        for (Map.Entry<String, String> e : refs(id, objects, h).entrySet()) {
            out.put(e.getKey(), inflateArray(e.getValue(), objects));
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static Array inflateArray(String id, Map<String, byte[]> objects) {
        Head h = headOf(id, objects, ARRAY);
        Map<String, Object> meta = (Map<String, Object>) Json.parse(body(objects.get(id), h));
        List<Object> shapeList = (List<Object>) meta.get("shape");
        long[] shape = new long[shapeList.size()];
        for (int i = 0; i < shape.length; i++) {
            shape[i] = (Long) shapeList.get(i);
        }
        List<byte[]> chunks = new ArrayList<>();
        long size = 0;
        for (Object index : (List<Object>) meta.get("arraychunk_ids")) {
            String chunkId = h.children.get(((Long) index).intValue());
            Head ch = headOf(chunkId, objects, ARRAY_CHUNK);
            byte[] content = objects.get(chunkId);
            byte[] data = Arrays.copyOfRange(content, ch.bodyOffset, content.length);
            chunks.add(data);
            size += data.length;
        }
        byte[] data = new byte[(int) size];
        int at = 0;
        for (byte[] c : chunks) {
            System.arraycopy(c, 0, data, at, c.length);
            at += c.length;
        }
        return new Array((String) meta.get("dtype"), shape, (String) meta.get("stype"), data);
    }

    private static Head headOf(String id, Map<String, byte[]> objects, String expectedType) {
        byte[] content = objects.get(id);
        if (content == null) {
            throw new IllegalArgumentException("object " + id + " is missing");
        }
        Head h = head(content);
        if (expectedType != null && !expectedType.equals(h.type)) {
            throw new IllegalArgumentException("object " + id + " is a " + h.type + ", expected " + expectedType);
        }
        return h;
    }

    private static String body(byte[] content, Head h) {
        return new String(content, h.bodyOffset, content.length - h.bodyOffset, StandardCharsets.UTF_8);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, String> refs(String id, Map<String, byte[]> objects, Head h) {
        Map<String, Object> parsed = (Map<String, Object>) Json.parse(body(objects.get(id), h));
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : parsed.entrySet()) {
            String childId = (String) e.getValue();
            if (!h.children.contains(childId)) {
                throw new IllegalArgumentException("object " + id + " refers to " + childId + ", not among its children");
            }
            out.put(e.getKey(), childId);
        }
        if (!out.values().containsAll(h.children)) {
            throw new IllegalArgumentException("object " + id + " has children it does not refer to");
        }
        return out;
    }

    private static <T> T parse(String id, Map<String, byte[]> objects, Head h, com.google.protobuf.Parser<T> parser) {
        byte[] content = objects.get(id);
        try {
            return parser.parseFrom(content, h.bodyOffset, content.length - h.bodyOffset);
        } catch (InvalidProtocolBufferException e) {
            throw new IllegalArgumentException("object " + id + ": bad protobuf body: " + e.getMessage(), e);
        }
    }

    // ---------------------------------------------------------------- protobuf conversions

    /** Conversions between this model and Flower's protobuf messages. */
    static final class Protos {
        private Protos() {}

        static MessageOuterClass.Metadata metadata(Metadata m) {
            MessageOuterClass.Metadata.Builder b = MessageOuterClass.Metadata.newBuilder()
                .setRunId(m.runId).setMessageId(m.messageId).setSrcNodeId(m.srcNodeId)
                .setDstNodeId(m.dstNodeId).setReplyToMessageId(m.replyToMessageId).setGroupId(m.groupId)
                .setTtl(m.ttl).setMessageType(m.messageType).setCreatedAt(m.createdAt);
            if (m.srcTaskId != null) {
                b.setSrcTaskId(m.srcTaskId);
            }
            if (m.dstTaskId != null) {
                b.setDstTaskId(m.dstTaskId);
            }
            return b.build();
        }

        static Metadata metadata(MessageOuterClass.Metadata p) {
            return Metadata.builder()
                .runId(p.getRunId())
                .messageId(p.getMessageId())
                .srcNodeId(p.getSrcNodeId())
                .dstNodeId(p.getDstNodeId())
                .replyToMessageId(p.getReplyToMessageId())
                .groupId(p.getGroupId())
                .ttl(p.getTtl())
                .messageType(p.getMessageType())
                .createdAt(p.getCreatedAt())
                .srcTaskId(p.hasSrcTaskId() ? p.getSrcTaskId() : null)
                .dstTaskId(p.hasDstTaskId() ? p.getDstTaskId() : null)
                .build();
        }

        static ErrorOuterClass.Error error(MessageError e) {
            return ErrorOuterClass.Error.newBuilder().setCode(e.code).setReason(e.reason == null ? "" : e.reason).build();
        }

        static MessageError error(ErrorOuterClass.Error p) {
            return new MessageError(p.getCode(), p.getReason().isEmpty() ? null : p.getReason());
        }

        // Python's record_value_dict_to_proto tries the allowed types in order (bool first), a list
        // takes the first type all its items have (an empty list: the first allowed type), and an int
        // above 2^63-1 goes as uint64.
        private enum Kind { BOOL, INT, FLOAT, STR, BYTES }

        private static Kind kindOf(Object v) {
            if (v instanceof Boolean) {
                return Kind.BOOL;
            }
            if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte
                || v instanceof BigInteger) {
                return Kind.INT;
            }
            if (v instanceof Double || v instanceof Float) {
                return Kind.FLOAT;
            }
            if (v instanceof String) {
                return Kind.STR;
            }
            if (v instanceof byte[]) {
                return Kind.BYTES;
            }
            return null;
        }

        private static boolean isUint64(Object v) {
            if (!(v instanceof BigInteger)) {
                return false;
            }
            BigInteger b = (BigInteger) v;
            if (b.signum() < 0 || b.bitLength() > 64) {
                throw new IllegalArgumentException("integer out of the 64-bit range: " + b);
            }
            return b.compareTo(INT64_MAX) > 0;
        }

        private static Kind listKind(List<?> list, Kind[] allowed, String key) {
            for (Kind k : allowed) {
                boolean all = true;
                for (Object item : list) {
                    if (kindOf(item) != k) {
                        all = false;
                        break;
                    }
                }
                if (all) {
                    return k;
                }
            }
            throw new IllegalArgumentException("value of '" + key + "' is not a list of one allowed type");
        }

        private static Kind valueKind(String key, Object v, Kind[] allowed) {
            Kind k = kindOf(v);
            if (k == null || !Arrays.asList(allowed).contains(k)) {
                throw new IllegalArgumentException("the type of '" + key + "' is not allowed: "
                    + (v == null ? "null" : v.getClass().getName()));
            }
            return k;
        }

        private static final Kind[] CONFIG_KINDS = {Kind.BOOL, Kind.INT, Kind.FLOAT, Kind.STR, Kind.BYTES};
        private static final Kind[] METRIC_KINDS = {Kind.FLOAT, Kind.INT};

        static Recorddict.ConfigRecord configRecord(ConfigRecord record) {
            Recorddict.ConfigRecord.Builder out = Recorddict.ConfigRecord.newBuilder();
            for (Map.Entry<String, Object> e : record.entrySet()) {
                Recorddict.ConfigRecordValue.Builder v = Recorddict.ConfigRecordValue.newBuilder();
                Object value = e.getValue();
                if (value instanceof List) {
                    List<?> list = (List<?>) value;
                    switch (listKind(list, CONFIG_KINDS, e.getKey())) {
                        case BOOL: {
                            Recorddict.BoolList.Builder l = Recorddict.BoolList.newBuilder();
                            for (Object o : list) l.addVals((Boolean) o);
                            v.setBoolList(l);
                            break;
                        }
                        case INT:
                            if (anyUint64(list)) {
                                v.setUintList(uintList(list));
                            } else {
                                v.setSintList(sintList(list));
                            }
                            break;
                        case FLOAT:
                            v.setDoubleList(doubleList(list));
                            break;
                        case STR: {
                            Recorddict.StringList.Builder l = Recorddict.StringList.newBuilder();
                            for (Object o : list) l.addVals((String) o);
                            v.setStringList(l);
                            break;
                        }
                        default: {
                            Recorddict.BytesList.Builder l = Recorddict.BytesList.newBuilder();
                            for (Object o : list) l.addVals(ByteString.copyFrom((byte[]) o));
                            v.setBytesList(l);
                        }
                    }
                } else {
                    switch (valueKind(e.getKey(), value, CONFIG_KINDS)) {
                        case BOOL: v.setBool((Boolean) value); break;
                        case INT:
                            if (isUint64(value)) {
                                v.setUint64(((BigInteger) value).longValue());
                            } else {
                                v.setSint64(((Number) value).longValue());
                            }
                            break;
                        case FLOAT: v.setDouble(((Number) value).doubleValue()); break;
                        case STR: v.setString((String) value); break;
                        default: v.setBytes(ByteString.copyFrom((byte[]) value));
                    }
                }
                out.addItems(Recorddict.ConfigRecord.Item.newBuilder().setKey(e.getKey()).setValue(v));
            }
            return out.build();
        }

        static Recorddict.MetricRecord metricRecord(MetricRecord record) {
            Recorddict.MetricRecord.Builder out = Recorddict.MetricRecord.newBuilder();
            for (Map.Entry<String, Object> e : record.entrySet()) {
                Recorddict.MetricRecordValue.Builder v = Recorddict.MetricRecordValue.newBuilder();
                Object value = e.getValue();
                if (value instanceof List) {
                    List<?> list = (List<?>) value;
                    if (listKind(list, METRIC_KINDS, e.getKey()) == Kind.FLOAT) {
                        v.setDoubleList(doubleList(list));
                    } else if (anyUint64(list)) {
                        v.setUintList(uintList(list));
                    } else {
                        v.setSintList(sintList(list));
                    }
                } else if (valueKind(e.getKey(), value, METRIC_KINDS) == Kind.FLOAT) {
                    v.setDouble(((Number) value).doubleValue());
                } else if (isUint64(value)) {
                    v.setUint64(((BigInteger) value).longValue());
                } else {
                    v.setSint64(((Number) value).longValue());
                }
                out.addItems(Recorddict.MetricRecord.Item.newBuilder().setKey(e.getKey()).setValue(v));
            }
            return out.build();
        }

        private static boolean anyUint64(List<?> list) {
            for (Object o : list) {
                if (isUint64(o)) {
                    return true;
                }
            }
            return false;
        }

        private static Recorddict.SintList sintList(List<?> list) {
            Recorddict.SintList.Builder l = Recorddict.SintList.newBuilder();
            for (Object o : list) l.addVals(((Number) o).longValue());
            return l.build();
        }

        private static Recorddict.UintList uintList(List<?> list) {
            Recorddict.UintList.Builder l = Recorddict.UintList.newBuilder();
            for (Object o : list) {
                if (o instanceof BigInteger) {
                    isUint64(o); // range check
                } else if (((Number) o).longValue() < 0) {
                    throw new IllegalArgumentException("negative value in an unsigned list: " + o);
                }
                l.addVals(((Number) o).longValue());
            }
            return l.build();
        }

        private static Recorddict.DoubleList doubleList(List<?> list) {
            Recorddict.DoubleList.Builder l = Recorddict.DoubleList.newBuilder();
            for (Object o : list) l.addVals(((Number) o).doubleValue());
            return l.build();
        }

        private static BigInteger unsigned(long v) {
            BigInteger b = BigInteger.valueOf(v & Long.MAX_VALUE);
            return v < 0 ? b.setBit(63) : b;
        }

        private static List<Object> unsignedList(List<Long> vals) {
            List<Object> out = new ArrayList<>();
            for (long v : vals) out.add(unsigned(v));
            return out;
        }

        static ConfigRecord configRecord(Recorddict.ConfigRecord proto) {
            ConfigRecord out = new ConfigRecord();
            for (Recorddict.ConfigRecord.Item item : proto.getItemsList()) {
                Recorddict.ConfigRecordValue v = item.getValue();
                Object value;
                switch (v.getValueCase()) {
                    case DOUBLE: value = v.getDouble(); break;
                    case SINT64: value = v.getSint64(); break;
                    case UINT64: value = unsigned(v.getUint64()); break;
                    case BOOL: value = v.getBool(); break;
                    case STRING: value = v.getString(); break;
                    case BYTES: value = v.getBytes().toByteArray(); break;
                    case DOUBLE_LIST: value = new ArrayList<Object>(v.getDoubleList().getValsList()); break;
                    case SINT_LIST: value = new ArrayList<Object>(v.getSintList().getValsList()); break;
                    case UINT_LIST: value = unsignedList(v.getUintList().getValsList()); break;
                    case BOOL_LIST: value = new ArrayList<Object>(v.getBoolList().getValsList()); break;
                    case STRING_LIST: value = new ArrayList<Object>(v.getStringList().getValsList()); break;
                    case BYTES_LIST: {
                        List<Object> l = new ArrayList<>();
                        for (ByteString b : v.getBytesList().getValsList()) l.add(b.toByteArray());
                        value = l;
                        break;
                    }
                    default: throw new IllegalArgumentException("ConfigRecord value of '" + item.getKey() + "' is unset");
                }
                out.put(item.getKey(), value);
            }
            return out;
        }

        static MetricRecord metricRecord(Recorddict.MetricRecord proto) {
            MetricRecord out = new MetricRecord();
            for (Recorddict.MetricRecord.Item item : proto.getItemsList()) {
                Recorddict.MetricRecordValue v = item.getValue();
                Object value;
                switch (v.getValueCase()) {
                    case DOUBLE: value = v.getDouble(); break;
                    case SINT64: value = v.getSint64(); break;
                    case UINT64: value = unsigned(v.getUint64()); break;
                    case DOUBLE_LIST: value = new ArrayList<Object>(v.getDoubleList().getValsList()); break;
                    case SINT_LIST: value = new ArrayList<Object>(v.getSintList().getValsList()); break;
                    case UINT_LIST: value = unsignedList(v.getUintList().getValsList()); break;
                    default: throw new IllegalArgumentException("MetricRecord value of '" + item.getKey() + "' is unset");
                }
                out.put(item.getKey(), value);
            }
            return out;
        }
    }
}
