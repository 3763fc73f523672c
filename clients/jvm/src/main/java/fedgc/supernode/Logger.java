package fedgc.supernode;

/**
 * Where the client's log lines go. An app installs its own with {@link Log#setLogger} (e.g. one that
 * calls {@code android.util.Log}); the library's default is {@link #JAVA_UTIL_LOGGING} (the
 * {@code java.util.logging} logger {@code "fedgc"}, which Android routes to logcat), and the command
 * line ({@code Main}) installs {@link #STDERR}, Flower-style lines on standard error. Implementations
 * are called from the node's threads (the main loop and the heartbeat thread) and must be thread-safe.
 */
public interface Logger {
    enum Level { DEBUG, INFO, WARNING, ERROR }

    void log(Level level, String text);

    /** Whether DEBUG lines are wanted (they are not even formatted otherwise). */
    default boolean debugEnabled() {
        return false;
    }

    /** One line per event on standard error: {@code HH:mm:ss.SSS LEVEL :      text}; DEBUG with env FEDGC_JVM_DEBUG. */
    Logger STDERR = new Logger() {
        private final boolean debug = System.getenv("FEDGC_JVM_DEBUG") != null;

        @Override
        public synchronized void log(Level level, String text) {
            String ts = new java.text.SimpleDateFormat("HH:mm:ss.SSS", java.util.Locale.ROOT).format(new java.util.Date());
            System.err.println(ts + " " + level + " :      " + text);
            System.err.flush();
        }

        @Override
        public boolean debugEnabled() {
            return debug;
        }
    };

    /** {@code java.util.logging.Logger.getLogger("fedgc")}: DEBUG as FINE, WARNING, ERROR as SEVERE. */
    Logger JAVA_UTIL_LOGGING = new Logger() {
        private final java.util.logging.Logger jul = java.util.logging.Logger.getLogger("fedgc");

        @Override
        public void log(Level level, String text) {
            switch (level) {
                case DEBUG: jul.fine(text); break;
                case WARNING: jul.warning(text); break;
                case ERROR: jul.severe(text); break;
                default: jul.info(text); break;
            }
        }

        @Override
        public boolean debugEnabled() {
            return jul.isLoggable(java.util.logging.Level.FINE);
        }
    };

    /** Drops every line. */
    Logger NONE = (level, text) -> { };
}
