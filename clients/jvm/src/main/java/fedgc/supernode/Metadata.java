package fedgc.supernode;


/**
 * Flower's message {@code Metadata}, immutable (build one with {@link #builder()}, change one with
 * {@link #toBuilder()} or {@link #withMessageId}). Ids are unsigned 64-bit values held in a long.
 */
public final class Metadata {
    public final long runId;
    public final String messageId;
    public final long srcNodeId;
    public final long dstNodeId;
    public final String replyToMessageId;
    public final String groupId;
    public final double ttl;
    public final String messageType;
    /** Unix time in seconds. */
    public final double createdAt;
    /** Null when unset. */
    public final Long srcTaskId;
    /** Null when unset. */
    public final Long dstTaskId;

    private Metadata(Builder b) {
        runId = b.runId;
        messageId = b.messageId;
        srcNodeId = b.srcNodeId;
        dstNodeId = b.dstNodeId;
        replyToMessageId = b.replyToMessageId;
        groupId = b.groupId;
        ttl = b.ttl;
        messageType = b.messageType;
        createdAt = b.createdAt;
        srcTaskId = b.srcTaskId;
        dstTaskId = b.dstTaskId;
    }

    public static Builder builder() {
        return new Builder();
    }

    public Builder toBuilder() {
        Builder b = new Builder();
        b.runId = runId;
        b.messageId = messageId;
        b.srcNodeId = srcNodeId;
        b.dstNodeId = dstNodeId;
        b.replyToMessageId = replyToMessageId;
        b.groupId = groupId;
        b.ttl = ttl;
        b.messageType = messageType;
        b.createdAt = createdAt;
        b.srcTaskId = srcTaskId;
        b.dstTaskId = dstTaskId;
        return b;
    }

    /** The same metadata with another message id (a message's id is its object id, known once deflated). */
    public Metadata withMessageId(String id) {
        return toBuilder().messageId(id).build();
    }

    /** An unsigned 64-bit id as a BigInteger (what Python sees). */
    public static java.math.BigInteger unsigned(long id) {
        java.math.BigInteger b = java.math.BigInteger.valueOf(id & Long.MAX_VALUE);
        return id < 0 ? b.setBit(63) : b;
    }

    @Override
    public String toString() {
        return "Metadata(run_id=" + Unsigned.toString(runId) + ", message_id=" + messageId
            + ", src_node_id=" + Unsigned.toString(srcNodeId) + ", dst_node_id="
            + Unsigned.toString(dstNodeId) + ", reply_to_message_id=" + replyToMessageId
            + ", group_id=" + groupId + ", ttl=" + ttl + ", message_type=" + messageType
            + ", created_at=" + createdAt + ")";
    }

    /** Builds a {@link Metadata}; strings default to "", numbers to 0, task ids to unset. */
    public static final class Builder {
        private long runId;
        private String messageId = "";
        private long srcNodeId;
        private long dstNodeId;
        private String replyToMessageId = "";
        private String groupId = "";
        private double ttl;
        private String messageType = "";
        private double createdAt;
        private Long srcTaskId;
        private Long dstTaskId;

        private Builder() {}

        public Builder runId(long v) { runId = v; return this; }
        public Builder messageId(String v) { messageId = v == null ? "" : v; return this; }
        public Builder srcNodeId(long v) { srcNodeId = v; return this; }
        public Builder dstNodeId(long v) { dstNodeId = v; return this; }
        public Builder replyToMessageId(String v) { replyToMessageId = v == null ? "" : v; return this; }
        public Builder groupId(String v) { groupId = v == null ? "" : v; return this; }
        public Builder ttl(double v) { ttl = v; return this; }
        public Builder messageType(String v) { messageType = v == null ? "" : v; return this; }
        public Builder createdAt(double v) { createdAt = v; return this; }
        public Builder srcTaskId(Long v) { srcTaskId = v; return this; }
        public Builder dstTaskId(Long v) { dstTaskId = v; return this; }

        public Metadata build() {
            return new Metadata(this);
        }
    }
}
