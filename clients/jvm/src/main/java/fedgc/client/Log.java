package fedgc.client;

import java.text.SimpleDateFormat;
import java.util.Date;
import java.util.Locale;

/** One line per event on stderr, Flower-style ("INFO :      ..."). */
public final class Log {
    private Log() {}

    private static synchronized void line(String level, String text) {
        String ts = new SimpleDateFormat("HH:mm:ss.SSS", Locale.ROOT).format(new Date());
        System.err.println(ts + " " + level + " :      " + text);
        System.err.flush();
    }

    public static void info(String text) {
        line("INFO", text);
    }

    public static void warn(String text) {
        line("WARNING", text);
    }

    public static void error(String text) {
        line("ERROR", text);
    }

    public static void debug(String text) {
        if (System.getenv("FEDGC_JVM_DEBUG") != null) {
            line("DEBUG", text);
        }
    }
}
