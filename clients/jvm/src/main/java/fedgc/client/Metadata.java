package fedgc.client;

import fedgc.wire.Unsigned;

/** Flower's message {@code Metadata}. Ids are unsigned 64-bit values held in a long. */
public final class Metadata {
    public long runId;
    public String messageId = "";
    public long srcNodeId;
    public long dstNodeId;
    public String replyToMessageId = "";
    public String groupId = "";
    public double ttl;
    public String messageType = "";
    /** Unix time in seconds. */
    public double createdAt;
    /** Null when unset. */
    public Long srcTaskId;
    /** Null when unset. */
    public Long dstTaskId;

    /** An unsigned 64-bit id as a BigInteger (what Python sees). */
    public static java.math.BigInteger unsigned(long id) {
        java.math.BigInteger b = java.math.BigInteger.valueOf(id & Long.MAX_VALUE);
        return id < 0 ? b.setBit(63) : b;
    }

    public Metadata copy() {
        Metadata m = new Metadata();
        m.runId = runId;
        m.messageId = messageId;
        m.srcNodeId = srcNodeId;
        m.dstNodeId = dstNodeId;
        m.replyToMessageId = replyToMessageId;
        m.groupId = groupId;
        m.ttl = ttl;
        m.messageType = messageType;
        m.createdAt = createdAt;
        m.srcTaskId = srcTaskId;
        m.dstTaskId = dstTaskId;
        return m;
    }

    @Override
    public String toString() {
        return "Metadata(run_id=" + Unsigned.toString(runId) + ", message_id=" + messageId
            + ", src_node_id=" + Unsigned.toString(srcNodeId) + ", dst_node_id="
            + Unsigned.toString(dstNodeId) + ", reply_to_message_id=" + replyToMessageId
            + ", group_id=" + groupId + ", ttl=" + ttl + ", message_type=" + messageType
            + ", created_at=" + createdAt + ")";
    }
}
