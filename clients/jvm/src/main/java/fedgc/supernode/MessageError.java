package fedgc.supernode;

/** Flower's message {@code Error}: a code (Flower's {@code ErrorCode}) and an optional reason. */
public final class MessageError {
    /** Flower's {@code ErrorCode.CLIENT_APP_RAISED_EXCEPTION}. */
    public static final long CLIENT_APP_RAISED_EXCEPTION = 2;

    public final long code;
    /** Null when there is none (Flower sends ""). */
    public final String reason;

    public MessageError(long code, String reason) {
        this.code = code;
        this.reason = reason;
    }

    @Override
    public String toString() {
        return "Error(code=" + code + ", reason=" + reason + ")";
    }
}
