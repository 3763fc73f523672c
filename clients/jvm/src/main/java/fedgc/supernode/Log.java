package fedgc.supernode;

/**
 * The client's log calls, sent to the installed {@link Logger} (default {@link Logger#JAVA_UTIL_LOGGING};
 * the command line installs {@link Logger#STDERR}). One logger per process: the client's classes log
 * through this facade.
 */
public final class Log {
    private static volatile Logger logger = Logger.JAVA_UTIL_LOGGING;

    private Log() {}

    /** Route every log line of the client to {@code to} (null: drop them). */
    public static void setLogger(Logger to) {
        logger = to == null ? Logger.NONE : to;
    }

    public static Logger logger() {
        return logger;
    }

    public static void info(String text) {
        logger.log(Logger.Level.INFO, text);
    }

    public static void warn(String text) {
        logger.log(Logger.Level.WARNING, text);
    }

    public static void error(String text) {
        logger.log(Logger.Level.ERROR, text);
    }

    public static void debug(String text) {
        Logger l = logger;
        if (l.debugEnabled()) {
            l.log(Logger.Level.DEBUG, text);
        }
    }
}
