package fedgc.supernode;

/** Flower's {@code Message}: metadata plus either content (a {@link RecordDict}) or an error. */
public final class Message {
    /** Flower's {@code MESSAGE_TTL_TOLERANCE}. */
    static final double MESSAGE_TTL_TOLERANCE = 0.1;

    public final Metadata metadata;
    private final RecordDict content;
    private final MessageError error;

    public Message(Metadata metadata, RecordDict content, MessageError error) {
        if ((content == null) == (error == null)) {
            throw new IllegalArgumentException("a message has either content or an error");
        }
        this.metadata = metadata;
        this.content = content;
        this.error = error;
    }

    public boolean hasContent() {
        return content != null;
    }

    public boolean hasError() {
        return error != null;
    }

    public RecordDict content() {
        if (content == null) {
            throw new IllegalStateException("message has no content (it carries " + error + ")");
        }
        return content;
    }

    public MessageError error() {
        if (error == null) {
            throw new IllegalStateException("message carries no error");
        }
        return error;
    }

    /** A reply to {@code to}, with the metadata Flower's {@code Message(content, reply_to=to)} gives it. */
    public static Message reply(Message to, RecordDict content) {
        return new Message(replyMetadata(to), content, null);
    }

    /** An error reply to {@code to}, as Flower's {@code Message(error, reply_to=to)}. */
    public static Message errorReply(Message to, MessageError error) {
        return new Message(replyMetadata(to), null, error);
    }

    static Metadata replyMetadata(Message to) {
        double now = System.currentTimeMillis() / 1000.0;
        return Metadata.builder()
            .runId(to.metadata.runId)
            .messageId("") // the object id, set when the reply is sent
            .srcNodeId(to.metadata.dstNodeId)
            .dstNodeId(to.metadata.srcNodeId)
            .replyToMessageId(to.metadata.messageId)
            .groupId(to.metadata.groupId)
            .createdAt(now)
            .ttl(to.metadata.createdAt + to.metadata.ttl - now) // the most the instruction allows
            .messageType(to.metadata.messageType)
            .srcTaskId(to.metadata.dstTaskId)
            .dstTaskId(to.metadata.srcTaskId)
            .build();
    }

    /** The same message with other metadata (content or error unchanged). */
    public Message withMetadata(Metadata other) {
        return new Message(other, content, error);
    }

    @Override
    public String toString() {
        return "Message(" + metadata + ", " + (content != null ? "content=" + content.keySet() : "error=" + error) + ")";
    }
}
