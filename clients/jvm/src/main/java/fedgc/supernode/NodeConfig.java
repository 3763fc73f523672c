package fedgc.supernode;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code --node-config}, read as {@code flower-supernode} reads it ({@code flwr.common.config.parse_config_args}):
 * space-separated {@code key=value} pairs, each value a TOML scalar: a quoted string, true/false, an
 * integer (Long) or a float (Double), e.g. {@code partition-id=0 num-partitions=2 name="pixel 7"}.
 */
final class NodeConfig {
    private static final Pattern PAIR = Pattern.compile("(\\S+?)=('[^']*'|\"[^\"]*\"|\\S+)");
    private static final Pattern INTEGER = Pattern.compile("[+-]?(0|[1-9](_?[0-9])*)");
    private static final Pattern FLOAT = Pattern.compile(
        "[+-]?(0|[1-9](_?[0-9])*)(\\.[0-9](_?[0-9])*)?([eE][+-]?[0-9](_?[0-9])*)?|[+-]?(inf|nan)");

    private NodeConfig() {}

    static Map<String, Object> parse(String text) {
        Map<String, Object> out = new LinkedHashMap<>();
        Matcher m = PAIR.matcher(text);
        int consumed = 0;
        while (m.find()) {
            if (!text.substring(consumed, m.start()).trim().isEmpty()) {
                throw new IllegalArgumentException("cannot read '" + text.substring(consumed, m.start()).trim() + "'");
            }
            consumed = m.end();
            out.put(m.group(1), value(m.group(2)));
        }
        if (!text.substring(consumed).trim().isEmpty()) {
            throw new IllegalArgumentException("cannot read '" + text.substring(consumed).trim() + "'");
        }
        return out;
    }

    private static Object value(String v) {
        if (v.length() >= 2 && v.startsWith("'") && v.endsWith("'")) {
            return v.substring(1, v.length() - 1); // TOML literal string
        }
        if (v.length() >= 2 && v.startsWith("\"") && v.endsWith("\"")) {
            String s = v.substring(1, v.length() - 1);
            if (s.indexOf('\\') >= 0) {
                return Json.parse(v); // TOML basic-string escapes are JSON's (for what a shell passes)
            }
            return s;
        }
        if ("true".equals(v) || "false".equals(v)) {
            return Boolean.valueOf(v);
        }
        if (INTEGER.matcher(v).matches()) {
            return Long.parseLong(v.replace("_", ""));
        }
        if (FLOAT.matcher(v).matches()) {
            String f = v.replace("_", "");
            if (f.endsWith("inf")) {
                return f.startsWith("-") ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY;
            }
            return f.endsWith("nan") ? Double.NaN : Double.parseDouble(f);
        }
        throw new IllegalArgumentException("value '" + v + "' is not a bool, int, float or quoted string");
    }
}
