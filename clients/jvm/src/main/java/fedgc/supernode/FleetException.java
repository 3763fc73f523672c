package fedgc.supernode;

/**
 * A Fleet API call the SuperLink answered with an HTTP error (its Flower error detail, when it sent one),
 * or with an answer this node refuses (over {@link FleetClient#maxResponseBytes()}): never retried.
 */
public final class FleetException extends Exception {
    private static final long serialVersionUID = 1L;
    public final int status;
    public final String detail;

    FleetException(String path, int status, String body) {
        super(path + ": HTTP " + status + (detailOf(body).isEmpty() ? "" : ": " + detailOf(body)));
        this.status = status;
        this.detail = detailOf(body);
    }

    private FleetException(int status, String detail, String message) {
        super(message);
        this.status = status;
        this.detail = detail;
    }

    /** An answer this node refuses although its status is a success (one over the node's maximum size). */
    static FleetException refused(String path, int status, String why) {
        return new FleetException(status, why, path + ": HTTP " + status + ": " + why);
    }

    /** The "detail" (and "extra") of Flower's JSON error body, else the body's first line. */
    static String detailOf(String body) {
        if (body == null) {
            return "";
        }
        try {
            Object parsed = Json.parse(body);
            if (parsed instanceof java.util.Map) {
                java.util.Map<?, ?> map = (java.util.Map<?, ?>) parsed;
                Object detail = map.get("detail");
                Object extra = map.get("extra");
                if (detail != null) {
                    return detail + (extra != null ? " (" + extra + ")" : "");
                }
            }
        } catch (RuntimeException ignored) {
            // not Flower's JSON error: fall through
        }
        String line = body.trim();
        int nl = line.indexOf('\n');
        line = nl >= 0 ? line.substring(0, nl) : line;
        return line.length() > 300 ? line.substring(0, 300) + "…" : line;
    }
}
