package fedgc.wire;

/**
 * An update blob that cannot be decoded. {@link #reason} is the short machine-readable tag of
 * docs/wire-format.md ("truncated", "bad-indices", ...), the same string fedgc's Python codec
 * ({@code fedgc/wire/codec.py}) gives for the same blob.
 */
public final class CodecException extends Exception {
    private static final long serialVersionUID = 1L;
    public final String reason;

    public CodecException(String reason, String detail) {
        super(reason + ": " + detail);
        this.reason = reason;
    }
}
