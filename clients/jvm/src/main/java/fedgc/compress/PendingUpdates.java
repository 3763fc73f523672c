package fedgc.compress;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * Updates sent but not yet known to be applied (fedgc's {@code settle_pending} in
 * fedgc/flower/client/client_app.py). The server's next message lists the rounds whose updates from this
 * client it applied ({@code applied-rounds}); {@link #settle} drops those and puts every other pending
 * update back into the memory, so an upload that was cut or late is never lost. Then the round's own
 * sent update becomes the pending one ({@link #record}).
 */
public final class PendingUpdates {
    /** "round/name" → dense sent values, in the order they were recorded. */
    public final LinkedHashMap<String, float[]> entries = new LinkedHashMap<>();

    public void settle(Memory memory, Set<Long> appliedRounds) {
        for (Map.Entry<String, float[]> e : entries.entrySet()) {
            String key = e.getKey();
            int slash = key.indexOf('/');
            long round = Long.parseLong(key.substring(0, slash));
            if (!appliedRounds.contains(round)) {
                memory.restore(key.substring(slash + 1), e.getValue());
            }
        }
        entries.clear();
    }

    /** Replace the pending updates by the one sent in {@code round}. */
    public void record(long round, CompressedUpdate update) {
        entries.clear();
        for (Map.Entry<String, float[]> e : update.sent.entrySet()) {
            entries.put(round + "/" + e.getKey(), e.getValue());
        }
    }
}
