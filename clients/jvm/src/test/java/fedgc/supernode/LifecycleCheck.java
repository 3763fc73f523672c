package fedgc.supernode;

import java.io.File;
import java.security.KeyPair;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;

/**
 * The start/stop/restart contract an app (an Android {@code Worker}) relies on, and the logger hook;
 * run by tests/test_jvm_lifecycle.py as {@code LifecycleCheck HOST:PORT DIR} against an insecure
 * SuperLink (a second address, 127.0.0.1:1, is unreachable). Uses no {@code Main}: a library user.
 * <ol>
 *   <li>every line goes to the installed {@link Logger}, none to System.err;</li>
 *   <li>{@code requestStop()} before {@code run()}: {@code run()} returns 0 at once;</li>
 *   <li>{@code run()} in a thread registers and activates (a node id), {@code requestStop()} makes it
 *   deactivate, unregister and return 0; {@code awaitFinished} sees it;</li>
 *   <li>a second {@code run()} of the same SuperNode throws IllegalStateException;</li>
 *   <li>a new SuperNode with the same handler (and a fresh self-registered key) connects again;</li>
 *   <li>{@code requestStop()} while retrying an unreachable SuperLink: {@code run()} returns 0 promptly.</li>
 * </ol>
 * Prints "lifecycle ok" (exit 0) or the first failure.
 */
public final class LifecycleCheck {
    private LifecycleCheck() {}

    static final List<String> LINES = Collections.synchronizedList(new ArrayList<String>());

    public static void main(String[] args) throws Exception {
        String address = args[0];
        File dir = new File(args[1]);
        Log.setLogger((level, text) -> LINES.add(level + " " + text));
        KeyPair keys = Keys.generate();
        FleetClient client = new FleetClient(address, keys, false, null, 10_000);
        EchoHandler handler = new EchoHandler();

        SuperNode early = node(client, keys, handler, dir, 0);
        early.requestStop();
        long t0 = System.nanoTime();
        check(early.run() == 0, "stopped before run: exit 0");
        check((System.nanoTime() - t0) / 1e6 < 500, "stopped before run: returns at once");
        check(early.nodeId() == null, "stopped before run: never registered");

        SuperNode first = node(client, keys, handler, dir, 0);
        int[] code = {-1};
        Thread t = new Thread(() -> code[0] = first.run(), "node-1");
        t.start();
        long id1 = waitForId(first);
        first.requestStop();
        first.requestStop();  // idempotent
        check(first.awaitFinished(20_000), "run() returns after requestStop()");
        t.join(5_000);
        check(code[0] == 0, "stopped on request: exit 0, got " + code[0]);
        check(has("SuperNode " + Metadata.unsigned(id1) + " deactivated") && has("SuperNode " + Metadata.unsigned(id1)
            + " unregistered"), "stop deactivates and unregisters: " + LINES);
        try {
            first.run();
            check(false, "a second run() must throw");
        } catch (IllegalStateException expected) {
            check(expected.getMessage().contains("runs once"), "the second run()'s reason: " + expected.getMessage());
        }

        // A self-registered key cannot be registered again on the same SuperLink once unregistered (Flower
        // answers 412 "Public key already in use"): the restart brings a fresh one, as Main does.
        KeyPair fresh = Keys.generate();
        SuperNode second = node(new FleetClient(address, fresh, false, null, 10_000), fresh, handler, dir, 0);
        Thread t2 = new Thread(second::run, "node-2");
        t2.start();
        long id2 = waitForId(second);
        second.requestStop();
        check(second.awaitFinished(20_000), "the restarted node stops too");
        check(has("SuperNode ID: " + Metadata.unsigned(id2)), "the restarted node connected: " + LINES);

        SuperNode lost = new SuperNode(new FleetClient("127.0.0.1:1", keys, false, null, 2_000), keys, true, handler,
            new LinkedHashMap<String, Object>(), dir, 0);
        int[] lostCode = {-1};
        Thread t3 = new Thread(() -> lostCode[0] = lost.run(), "node-3");
        t3.start();
        Thread.sleep(1500);
        long t1 = System.nanoTime();
        lost.requestStop();
        check(lost.awaitFinished(5_000), "a node retrying an unreachable SuperLink stops on request");
        t3.join(1_000);
        check(lostCode[0] == 0, "stopped while retrying: exit 0, got " + lostCode[0]);
        check(LINES.size() > 5, "lines reached the installed logger");
        System.out.println("lifecycle ok: node " + Metadata.unsigned(id1) + ", restarted as " + Metadata.unsigned(id2)
            + "; stop while retrying took " + Math.round((System.nanoTime() - t1) / 1e6) + " ms; "
            + LINES.size() + " log lines to the app's logger");
    }

    static SuperNode node(FleetClient client, KeyPair keys, MessageHandler handler, File dir, long maxWaitMs) {
        return new SuperNode(client, keys, true, handler, new LinkedHashMap<String, Object>(), dir, maxWaitMs)
            .pollInterval(0.2);
    }

    static long waitForId(SuperNode node) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 60_000;
        while (node.nodeId() == null) {
            check(System.currentTimeMillis() < deadline, "no node id within 60 s: " + LINES);
            Thread.sleep(50);
        }
        return node.nodeId();
    }

    static boolean has(String text) {
        synchronized (LINES) {
            for (String line : LINES) {
                if (line.contains(text)) {
                    return true;
                }
            }
        }
        return false;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAIL: " + what);
            System.exit(1);
        }
    }
}
