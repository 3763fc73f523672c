package fedgc.supernode;

import flwr.proto.FleetOuterClass;
import java.io.File;
import java.security.KeyPair;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;

/**
 * The bound on what {@link FleetClient} reads, run by tests/test_jvm_response_limit.py as
 * {@code ResponseLimitCheck HOST:PORT DIR} against a fake Fleet server (Python, 127.0.0.1) whose methods
 * answer: {@code exact} a valid protobuf of exactly {@link #LIMIT} bytes; {@code one-over} one byte more,
 * with its {@code Content-Length}; {@code endless} bytes without a {@code Content-Length} (chunked) until
 * the client hangs up; {@code declares-huge} a {@code Content-Length} of 10^12, then bytes until the client
 * hangs up; {@code error-endless} HTTP 500 with an endless body; and a SuperNode's calls, whose
 * {@code pull-messages} is answered like {@code declares-huge}. Run with a small heap: an answer read
 * whole would not fit it.
 * <ol>
 *   <li>a client whose maximum is {@link #LIMIT} takes {@code exact} and refuses the others, each
 *   within 5 s, with the sizes in its reason, and still takes {@code exact} afterwards;</li>
 *   <li>a client made with the default maximum has {@link FleetClient#DEFAULT_MAX_RESPONSE_BYTES} and
 *   refuses {@code declares-huge} unread;</li>
 *   <li>a SuperNode whose PullMessages is answered too large logs the reason (ERROR) and goes on
 *   polling until stopped.</li>
 * </ol>
 * Prints "response limit ok" (exit 0) or the first failure.
 */
public final class ResponseLimitCheck {
    private ResponseLimitCheck() {}

    static final int LIMIT = 1 << 20;
    static final List<String> LINES = Collections.synchronizedList(new ArrayList<String>());

    public static void main(String[] args) throws Exception {
        String address = args[0];
        File dir = new File(args[1]);
        Log.setLogger((level, text) -> LINES.add(level + " " + text));
        KeyPair keys = Keys.generate();
        FleetClient small = new FleetClient(address, keys, false, null, 10_000, LIMIT);
        check(small.maxResponseBytes() == LIMIT, "the maximum given is the client's");

        pull(small, "exact");
        refused(small, "one-over", 200, "the answer declares " + (LIMIT + 1) + " bytes, over the maximum of " + LIMIT
            + "; refused unread");
        refused(small, "endless", 200, "the answer is over the maximum of " + LIMIT + " bytes; refused, read no further");
        refused(small, "declares-huge", 200, "the answer declares 1000000000000 bytes, over the maximum of " + LIMIT);
        refused(small, "error-endless", 500, "not read");
        pull(small, "exact");  // a refused answer's connection was dropped, not handed to the next call

        FleetClient standard = new FleetClient(address, keys, false, null, 10_000);
        check(standard.maxResponseBytes() == FleetClient.DEFAULT_MAX_RESPONSE_BYTES
            && FleetClient.DEFAULT_MAX_RESPONSE_BYTES == 64 * 1024 * 1024, "the default maximum is 64 MiB, got "
            + standard.maxResponseBytes());
        refused(standard, "declares-huge", 200, "the answer declares 1000000000000 bytes, over the maximum of "
            + FleetClient.DEFAULT_MAX_RESPONSE_BYTES + "; refused unread");

        SuperNode node = new SuperNode(standard, keys, true, new EchoHandler(), new LinkedHashMap<String, Object>(),
            dir, 0).pollInterval(0.2);
        Thread t = new Thread(node::run, "node");
        t.start();
        String expected = "pull-messages: HTTP 200: the answer declares 1000000000000 bytes";
        long deadline = System.currentTimeMillis() + 20_000;
        while (count("ERROR " + expected) < 2) {
            check(System.currentTimeMillis() < deadline, "the SuperNode logs the refused PullMessages and polls again: "
                + LINES);
            Thread.sleep(50);
        }
        node.requestStop();
        check(node.awaitFinished(20_000), "the SuperNode stops on request");
        System.out.println("response limit ok: " + count("ERROR " + expected) + " PullMessages answers refused; "
            + LINES.size() + " log lines");
    }

    static void pull(FleetClient client, String method) throws Exception {
        client.call(method, FleetOuterClass.PullMessagesRequest.getDefaultInstance(),
            FleetOuterClass.PullMessagesResponse.parser(), 5_000);
    }

    static void refused(FleetClient client, String method, int status, String reason) throws Exception {
        long t0 = System.nanoTime();
        try {
            pull(client, method);
            check(false, method + ": an answer over the maximum must be refused");
        } catch (FleetException e) {
            check(e.status == status, method + ": status " + status + ", got " + e.status);
            check(e.getMessage().startsWith(method + ": HTTP " + status + ": ") && e.getMessage().contains(reason),
                method + ": the reason says '" + reason + "', got: " + e.getMessage());
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        check(ms < 5_000, method + ": refused within 5 s, took " + ms + " ms");
    }

    static int count(String text) {
        int n = 0;
        synchronized (LINES) {
            for (String line : LINES) {
                if (line.contains(text)) {
                    n++;
                }
            }
        }
        return n;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAIL: " + what);
            System.exit(1);
        }
    }
}
