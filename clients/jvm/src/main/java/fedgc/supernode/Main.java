package fedgc.supernode;

import java.io.File;
import java.security.KeyPair;
import javax.net.ssl.SSLSocketFactory;

/**
 * The SuperNode command line ({@code flower-supernode}'s options): {@code --superlink HOST:PORT [--insecure |
 * --root-certificates CA.pem] [--auth-supernode-private-key KEY] [--node-config "k=v ..."] [--data-dir DIR]
 * [--handler CLASS] [--max-wait-time SECONDS] [--poll-interval SECONDS] [--heartbeat-interval SECONDS]}:
 * a SuperNode on the JVM running the {@link MessageHandler} {@code --handler} names. The SDK knows no
 * app: {@link #run(String[], String)} takes the app's default handler ({@code fedgc.client.Main}, the
 * jar's main class, passes fedgc's); {@link #main} itself requires {@code --handler}.
 * Bad arguments and failures print one line ({@code error: ...}); SIGTERM/Ctrl-C deactivate the node.
 */
public final class Main {
    private Main() {}

    static final String USAGE = "usage: java -jar fedgc-client.jar --superlink HOST:PORT "
        + "[--insecure | --root-certificates CA.pem] [--auth-supernode-private-key KEY] "
        + "[--node-config \"k=v ...\"] [--data-dir DIR] [--handler CLASS] [--max-wait-time SECONDS] "
        + "[--poll-interval SECONDS] [--heartbeat-interval SECONDS]";

    static final class UsageError extends Exception {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    static final class Options {
        String superlink;
        boolean insecure;
        String rootCertificates;
        String authKey;
        java.util.Map<String, Object> nodeConfig = new java.util.LinkedHashMap<>();
        File dataDir;
        String handler;
        long maxWaitMs = 0;
        double pollInterval = SuperNode.DEFAULT_POLL_INTERVAL_S;
        double heartbeatInterval = SuperNode.HEARTBEAT_INTERVAL_S;
    }

    static Options parse(String[] args) throws UsageError {
        return parse(args, null);
    }

    static Options parse(String[] args, String defaultHandler) throws UsageError {
        Options o = new Options();
        o.handler = defaultHandler;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String value = null;
            if (a.startsWith("--") && a.contains("=")) {
                value = a.substring(a.indexOf('=') + 1);
                a = a.substring(0, a.indexOf('='));
            }
            switch (a) {
                case "--insecure":
                    o.insecure = true;
                    continue;
                case "-h":
                case "--help":
                    throw new UsageError(null);
                case "--superlink":
                case "--root-certificates":
                case "--auth-supernode-private-key":
                case "--node-config":
                case "--data-dir":
                case "--handler":
                case "--max-wait-time":
                case "--poll-interval":
                case "--heartbeat-interval":
                    if (value == null) {
                        if (i + 1 >= args.length) {
                            throw new UsageError(a + " needs a value");
                        }
                        value = args[++i];
                    }
                    break;
                default:
                    throw new UsageError("unknown argument " + args[i]);
            }
            switch (a) {
                case "--superlink": o.superlink = value; break;
                case "--root-certificates": o.rootCertificates = value; break;
                case "--auth-supernode-private-key": o.authKey = value; break;
                case "--node-config":
                    try {
                        o.nodeConfig.putAll(NodeConfig.parse(value));
                    } catch (IllegalArgumentException e) {
                        throw new UsageError("--node-config: " + e.getMessage());
                    }
                    break;
                case "--data-dir": o.dataDir = new File(value); break;
                case "--handler": o.handler = value; break;
                case "--poll-interval":
                    o.pollInterval = seconds(a, value, 0.01, 3600);
                    break;
                case "--heartbeat-interval":
                    o.heartbeatInterval = seconds(a, value, 10, 1800); // Flower's accepted range
                    break;
                default:
                    try {
                        o.maxWaitMs = (long) (Double.parseDouble(value) * 1000);
                    } catch (NumberFormatException e) {
                        throw new UsageError("--max-wait-time must be a number of seconds, got '" + value + "'");
                    }
            }
        }
        if (o.superlink == null) {
            throw new UsageError("--superlink HOST:PORT is required");
        }
        if (o.handler == null) {
            throw new UsageError("--handler CLASS is required (a " + MessageHandler.class.getName() + ")");
        }
        int colon = o.superlink.lastIndexOf(':');
        boolean portOk = colon > 0 && o.superlink.substring(colon + 1).matches("\\d{1,5}")
            && Integer.parseInt(o.superlink.substring(colon + 1)) <= 65535;
        if (!portOk) {
            throw new UsageError("--superlink must be HOST:PORT, got '" + o.superlink + "'");
        }
        if (o.insecure && o.rootCertificates != null) {
            throw new UsageError("--insecure and --root-certificates exclude each other");
        }
        if (o.insecure && o.authKey != null) {
            throw new UsageError("SuperNode authentication (--auth-supernode-private-key) needs TLS: "
                + "use --root-certificates, not --insecure");
        }
        if (o.authKey != null && !new File(o.authKey).isFile()) {
            throw new UsageError("--auth-supernode-private-key: no such file: " + o.authKey);
        }
        if (o.rootCertificates != null && !new File(o.rootCertificates).isFile()) {
            throw new UsageError("--root-certificates: no such file: " + o.rootCertificates);
        }
        if (o.dataDir != null && !o.dataDir.isDirectory()) {
            throw new UsageError("--data-dir: no such directory: " + o.dataDir);
        }
        return o;
    }

    static double seconds(String option, String value, double min, double max) throws UsageError {
        double s;
        try {
            s = Double.parseDouble(value);
        } catch (NumberFormatException e) {
            throw new UsageError(option + " must be a number of seconds, got '" + value + "'");
        }
        if (!(s >= min && s <= max)) {
            throw new UsageError(option + " must be between " + min + " and " + max + " seconds, got '" + value + "'");
        }
        return s;
    }

    static MessageHandler loadHandler(String className) throws UsageError {
        try {
            Object h = Class.forName(className).getDeclaredConstructor().newInstance();
            if (!(h instanceof MessageHandler)) {
                throw new UsageError("--handler " + className + " is not a " + MessageHandler.class.getName());
            }
            return (MessageHandler) h;
        } catch (ReflectiveOperationException e) {
            throw new UsageError("--handler " + className + " cannot be made: " + e);
        }
    }

    /** The command without a default handler: {@code --handler CLASS} is required. */
    public static void main(String[] args) {
        run(args, null);
    }

    /**
     * Runs the command line and exits the JVM with the node's exit code; {@code defaultHandler} is the
     * {@link MessageHandler} class used without {@code --handler} (null: {@code --handler} required).
     */
    public static void run(String[] args, String defaultHandler) {
        Log.setLogger(Logger.STDERR);  // the command line logs to standard error; a library user picks its own
        Options o;
        MessageHandler handler;
        try {
            o = parse(args, defaultHandler);
            handler = loadHandler(o.handler);
        } catch (UsageError e) {
            if (e.getMessage() == null) {
                System.out.println(USAGE);
                System.exit(0);
            }
            System.err.println("error: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        }
        SSLSocketFactory ssl = null;
        if (o.rootCertificates != null) {
            try {
                ssl = Tls.trusting(o.rootCertificates);
            } catch (Exception e) {
                System.err.println("error: cannot read the root certificates " + o.rootCertificates + ": " + e.getMessage());
                System.exit(2);
                return;
            }
        }
        KeyPair keys;
        if (o.authKey != null) {
            try {
                keys = Keys.loadOpenSsh(B64.readFile(new File(o.authKey)));
            } catch (Exception e) {
                System.err.println("error: unable to parse the private key file " + o.authKey + ": " + e.getMessage());
                System.exit(2);
                return;
            }
        } else {
            keys = Keys.generate();
        }
        FleetClient client = new FleetClient(o.superlink, keys, !o.insecure, ssl, 30000);
        // Without a key of its own the node registers a fresh one (and unregisters it on exit), as
        // flower-supernode does; a registered key (flwr supernode register) stays registered.
        SuperNode node = new SuperNode(client, keys, o.authKey == null, handler, o.nodeConfig, o.dataDir, o.maxWaitMs)
            .pollInterval(o.pollInterval).heartbeatInterval(o.heartbeatInterval);
        Log.info("Starting fedgc JVM SuperNode (Flower " + Version.flwr() + " Fleet API) for "
            + (o.insecure ? "http://" : "https://") + o.superlink + ", handler " + o.handler);
        java.util.concurrent.atomic.AtomicBoolean exiting = new java.util.concurrent.atomic.AtomicBoolean();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (exiting.get()) {
                return; // main() is exiting with the node's own exit code
            }
            node.requestStop(); // SIGTERM / Ctrl-C: deactivate, then exit 0 like flower-supernode
            try {
                if (node.awaitFinished(15000)) {
                    Log.info("SuperNode terminated gracefully.");
                    Runtime.getRuntime().halt(0);
                }
            } catch (InterruptedException ignored) {
                // exiting anyway
            }
        }, "fedgc-shutdown"));
        int code;
        try {
            code = node.run();
        } catch (RuntimeException e) {
            System.err.println("error: " + SuperNode.describe(e));
            code = 1;
        }
        exiting.set(true);
        System.exit(code);
    }
}
