package fedgc.supernode;

import com.google.protobuf.ByteString;
import flwr.proto.FleetOuterClass;
import flwr.proto.Heartbeat;
import flwr.proto.MessageOuterClass;
import flwr.proto.NodeOuterClass;
import flwr.proto.Recorddict;
import flwr.proto.RunOuterClass;
import flwr.proto.Transport;
import java.io.File;
import java.io.IOException;
import java.math.BigInteger;
import java.security.KeyPair;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A Flower SuperNode in Java: what {@code flower-supernode} does over the Fleet API (Flower 1.41–1.42,
 * {@code flwr.supernode.fleet_http_connection} and {@code start_client_internal}), with a
 * {@link MessageHandler} in place of a ClientApp.
 *
 * <p>Register (self-registered, with a fresh SECP384R1 key) and activate the node; send heartbeats
 * from a background thread; poll PullMessages (every 3 s when idle); for a message, pull its object
 * tree object by object (each checked against its SHA-256 id), confirm receipt, rebuild it, hand it
 * to the handler; push the reply's metadata and object tree, then the objects the SuperLink asks for;
 * on stop, deactivate and unregister.
 */
public final class SuperNode {
    /** Flower's HEARTBEAT_DEFAULT_INTERVAL, HEARTBEAT_CALL_TIMEOUT and HEARTBEAT_BASE_MULTIPLIER. */
    static final double HEARTBEAT_INTERVAL_S = 30;
    static final double HEARTBEAT_CALL_TIMEOUT_S = 5;
    static final double HEARTBEAT_BASE_MULTIPLIER = 0.8;
    /** Flower's PULL_MAX_TRIES_PER_OBJECT, PULL_INITIAL_BACKOFF and PULL_BACKOFF_CAP. */
    static final int PULL_MAX_TRIES_PER_OBJECT = 500;
    static final double PULL_INITIAL_BACKOFF_S = 1;
    static final double PULL_BACKOFF_CAP_S = 10;
    /** Flower's SuperNode sleeps 3 s between idle pulls; this node's default is shorter (see Main). */
    static final double DEFAULT_POLL_INTERVAL_S = 1.0;

    /** Re-registration back-off cap, seconds. */
    static final double REJOIN_BACKOFF_CAP_S = 60;
    /** The SuperLink's answer to a node id it does not know for the key (Flower's node authentication). */
    static final int FORGOTTEN = 401;

    private static final Random RANDOM = new Random();

    private final FleetClient client;
    private final KeyPair keys;
    private final boolean selfRegistered;
    private final MessageHandler handler;
    private final File dataDir;
    private final Map<String, Object> nodeConfig;
    private final CountDownLatch stop = new CountDownLatch(1);
    private final CountDownLatch finished = new CountDownLatch(1);
    private final java.util.concurrent.atomic.AtomicBoolean started = new java.util.concurrent.atomic.AtomicBoolean();
    private final Retry retry;
    private final Retry heartbeatRetry;
    private final Map<Long, Map<String, Object>> runs = new HashMap<>();
    private volatile int exitCode = 0;
    private volatile String heartbeatForgotten;
    private volatile int rejoins;
    private volatile NodeOuterClass.Node node;
    private final long maxWaitMs;
    private long pollMs = (long) (DEFAULT_POLL_INTERVAL_S * 1000);
    private double heartbeatIntervalS = HEARTBEAT_INTERVAL_S;

    /** Seconds between PullMessages while no message is waiting. */
    public SuperNode pollInterval(double seconds) {
        this.pollMs = (long) (seconds * 1000);
        return this;
    }

    /** The heartbeat interval announced to the SuperLink (Flower accepts 10 to 1800 s); the node is
     *  marked offline 2 intervals after its last heartbeat. */
    public SuperNode heartbeatInterval(double seconds) {
        this.heartbeatIntervalS = seconds;
        return this;
    }

    /**
     * @param selfRegistered true: register the key and unregister on exit (flower-supernode without
     *     {@code --auth-supernode-private-key}); false: the key was registered beforehand
     * @param maxWaitMs how long to keep retrying an unreachable SuperLink (≤ 0: forever)
     */
    public SuperNode(FleetClient client, KeyPair keys, boolean selfRegistered, MessageHandler handler,
                     Map<String, Object> nodeConfig, File dataDir, long maxWaitMs) {
        this.nodeConfig = new LinkedHashMap<>(nodeConfig);
        this.client = client;
        this.keys = keys;
        this.selfRegistered = selfRegistered;
        this.handler = handler;
        this.dataDir = dataDir;
        this.retry = new Retry(stop, maxWaitMs);
        this.maxWaitMs = maxWaitMs;
        this.heartbeatRetry = new Retry(stop, 0);
    }

    /**
     * Ask the node to stop, from any thread (a signal handler, an Android {@code Worker.onStopped()}),
     * any number of times, before or during {@link #run}: {@link #run} then deactivates the node (and
     * unregisters a self-registered key) and returns 0. A message being handled is finished first (its
     * reply may be lost; the handler's state file already holds its update as pending). Does not block;
     * see {@link #awaitFinished}.
     */
    public void requestStop() {
        stop.countDown();
    }

    /** Wait until {@link #run} has returned (e.g. from a shutdown hook); true if it has. */
    public boolean awaitFinished(long ms) throws InterruptedException {
        return finished.await(ms, TimeUnit.MILLISECONDS);
    }

    /**
     * Connect and serve until stopped; blocks the calling thread. Returns 0 when stopped on request
     * ({@link #requestStop}, before or during the run), 1 when the node cannot go on (the SuperLink
     * refused it, or {@code maxWaitMs} passed without reaching it). A SuperNode runs once: a second
     * call throws {@link IllegalStateException}; to connect again (an Android {@code Worker}'s next
     * session, a restart after an error) make a new SuperNode with the same handler (or a new one of
     * its class) and data dir — the handler's state is on disk. A key registered by the operator gets
     * the same node id again; a self-registered key is unregistered on stop and the SuperLink refuses to
     * register it a second time (HTTP 412 "Public key already in use"), so a self-registered node
     * restarts with a fresh key ({@link Keys#generate()}, as the command line does) and a new node id.
     */
    public int run() {
        if (!started.compareAndSet(false, true)) {
            throw new IllegalStateException("this SuperNode has already run: a SuperNode runs once, make a new one "
                + "(same keys, handler and data dir) to connect again");
        }
        try {
            if (stop.getCount() == 0) {
                return 0;  // stopped before it started: nothing to connect or deactivate
            }
            return runConnected();
        } finally {
            finished.countDown();
        }
    }

    /** The node id the SuperLink gave this node (it changes if the node registers again), or null before. */
    public Long nodeId() {
        NodeOuterClass.Node n = node;
        return n == null ? null : n.getNodeId();
    }

    private int runConnected() {
        ByteString publicKey = ByteString.copyFrom(Keys.publicKeyPem(keys.getPublic()));
        long nodeId;
        try {
            if (selfRegistered) {
                retry.invoke("RegisterNode", () -> client.call("register-node",
                    FleetOuterClass.RegisterNodeFleetRequest.newBuilder().setPublicKey(publicKey).build(),
                    FleetOuterClass.RegisterNodeFleetResponse.parser(), 0));
            }
            nodeId = activate(publicKey);
        } catch (Retry.Stopped e) {
            return 0;
        } catch (FleetException | IOException e) {
            Log.error("Failed to initialize the connection to the SuperLink: " + describe(e));
            return 1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 1;
        }
        node = NodeOuterClass.Node.newBuilder().setNodeId(nodeId).build();
        Log.info("SuperNode ID: " + Metadata.unsigned(nodeId));
        Thread heartbeats = new Thread(this::sendHeartbeats, "fedgc-heartbeat");
        heartbeats.setDaemon(true);
        heartbeats.start();
        try {
            while (stop.getCount() > 0) {
                boolean received = false;
                String forgotten = heartbeatForgotten;
                if (forgotten == null) {
                    try {
                        received = pullAndReply();
                    } catch (Retry.Stopped e) {
                        break;
                    } catch (FleetException e) {
                        if (e.status == FORGOTTEN) {
                            forgotten = e.getMessage();
                        } else {
                            Log.error(e.getMessage());
                        }
                    } catch (IOException | RuntimeException e) {
                        Log.error(describe(e));
                    }
                }
                if (forgotten != null) {
                    nodeId = rejoin(publicKey, nodeId, forgotten);  // failures end the node (below)
                    continue;
                }
                if (!received && stop.await(pollMs, TimeUnit.MILLISECONDS)) {
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Retry.Stopped e) {
            return exitCode;  // stopped while registering again: there is no node to deactivate
        } catch (FleetException | IOException e) {
            Log.error("Could not register this SuperNode again: " + describe(e));
            stop.countDown();
            heartbeats.interrupt();
            return 1;
        } finally {
            stop.countDown();
            heartbeats.interrupt();
        }
        leave(node.getNodeId());
        return exitCode;
    }

    /**
     * ActivateNode. A node whose process died without deactivating (killed, crashed) stays online on
     * the SuperLink until two heartbeat intervals have passed, and the SuperLink refuses to activate it
     * again meanwhile (HTTP 412, "Failed to activate SuperNode."); a restarted node waits that out (at
     * most 2 × 30 s, Flower's default interval, or 2 × its own if longer, plus 10 s; at most
     * {@code --max-wait-time} when given) instead of giving up. The SuperLink answers an unknown key
     * the same way, so such a node gives up only then.
     */
    private long activate(ByteString publicKey) throws IOException, FleetException, Retry.Stopped, InterruptedException {
        long give = (long) ((2 * Math.max(HEARTBEAT_INTERVAL_S, heartbeatIntervalS) + 10) * 1000);
        if (maxWaitMs > 0) {
            give = Math.min(give, maxWaitMs);
        }
        long deadline = System.currentTimeMillis() + give;
        while (true) {
            try {
                return retry.invoke("ActivateNode", () -> client.call("activate-node",
                    FleetOuterClass.ActivateNodeRequest.newBuilder().setPublicKey(publicKey)
                        .setHeartbeatInterval(heartbeatIntervalS).build(),
                    FleetOuterClass.ActivateNodeResponse.parser(), 0)).getNodeId();
            } catch (FleetException e) {
                if (e.status != 412 || System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Log.warn("Activation refused (" + e.getMessage() + "): the SuperLink may still hold this SuperNode "
                    + "online from an earlier session; retrying in 2 s");
                if (stop.await(2000, TimeUnit.MILLISECONDS)) {
                    throw new Retry.Stopped();
                }
            }
        }
    }

    /**
     * The SuperLink no longer knows this node (HTTP 401 "Invalid SuperNode authentication" for its
     * node id, or a heartbeat answered "not recognized"): it was restarted without its database, or the
     * node was removed. Register (a self-registered node) and activate again, with back-off (1 s doubling
     * to 60 s, full jitter; connection failures retried as everywhere), until it succeeds, the node is
     * stopped, or {@code maxWaitMs} has passed. The handler, its memory and its pending update are
     * untouched: the node goes on with a new node id. A node whose key was registered by an operator
     * ({@code flwr supernode register}) waits until the key is registered again.
     */
    private long rejoin(ByteString publicKey, long oldId, String reason)
            throws IOException, FleetException, Retry.Stopped, InterruptedException {
        long started = System.currentTimeMillis();
        heartbeatForgotten = null;
        Log.warn("The SuperLink no longer knows SuperNode " + Metadata.unsigned(oldId) + " (" + reason
            + "): it restarted without its database, or the node was removed. Registering again; the pending "
            + "update and the memory are kept");
        double delay = 1.0;
        for (int attempt = 1; ; attempt++) {
            try {
                if (selfRegistered) {
                    retry.invoke("RegisterNode", () -> client.call("register-node",
                        FleetOuterClass.RegisterNodeFleetRequest.newBuilder().setPublicKey(publicKey).build(),
                        FleetOuterClass.RegisterNodeFleetResponse.parser(), 0));
                }
                long id = activate(publicKey);
                node = NodeOuterClass.Node.newBuilder().setNodeId(id).build();
                heartbeatForgotten = null;
                rejoins++;
                Log.info(String.format(Locale.ROOT, "Registered again after %.2f s (%d attempts): SuperNode ID: %s "
                    + "(was %s)", (System.currentTimeMillis() - started) / 1000.0, attempt, Metadata.unsigned(id),
                    Metadata.unsigned(oldId)));
                return id;
            } catch (FleetException e) {
                if (maxWaitMs > 0 && System.currentTimeMillis() - started >= maxWaitMs) {
                    throw e;
                }
                double wait = RANDOM.nextDouble() * delay;
                Log.warn(String.format(Locale.ROOT, "Registering again failed (%s); retrying in %.2f s",
                    e.getMessage(), wait));
                if (stop.await((long) (wait * 1000), TimeUnit.MILLISECONDS)) {
                    throw new Retry.Stopped();
                }
                delay = Math.min(delay * 2, REJOIN_BACKOFF_CAP_S);
            }
        }
    }

    /** How many times this node registered again after the SuperLink forgot it. */
    public int rejoins() {
        return rejoins;
    }

    private void leave(long nodeId) {
        try {
            client.call("deactivate-node", FleetOuterClass.DeactivateNodeRequest.newBuilder().setNodeId(nodeId).build(),
                FleetOuterClass.DeactivateNodeResponse.parser(), 5000);
            Log.info("SuperNode " + Metadata.unsigned(nodeId) + " deactivated");
        } catch (FleetException | IOException e) {
            Log.warn("Deactivation failed: " + describe(e));
        }
        if (selfRegistered) {
            try {
                client.call("unregister-node", FleetOuterClass.UnregisterNodeFleetRequest.newBuilder().setNodeId(nodeId).build(),
                    FleetOuterClass.UnregisterNodeFleetResponse.parser(), 5000);
                Log.info("SuperNode " + Metadata.unsigned(nodeId) + " unregistered");
            } catch (FleetException | IOException e) {
                Log.warn("Unregistration failed: " + describe(e));
            }
        }
    }

    static String describe(Exception e) {
        if (e instanceof FleetException || e.getMessage() == null) {
            return e instanceof FleetException ? e.getMessage() : e.toString();
        }
        String name = e.getClass().getSimpleName();
        return name + ": " + e.getMessage();
    }

    // ------------------------------------------------------------ heartbeats

    private void sendHeartbeats() {
        while (stop.getCount() > 0) {
            NodeOuterClass.Node current = node;
            Heartbeat.SendNodeHeartbeatRequest request = Heartbeat.SendNodeHeartbeatRequest.newBuilder()
                .setNode(current).setHeartbeatInterval(heartbeatIntervalS).build();
            try {
                Heartbeat.SendNodeHeartbeatResponse response = heartbeatRetry.invoke("SendNodeHeartbeat",
                    () -> client.call("send-node-heartbeat", request, Heartbeat.SendNodeHeartbeatResponse.parser(),
                        (int) (HEARTBEAT_CALL_TIMEOUT_S * 1000)));
                if (!response.getSuccess() && current == node) {
                    heartbeatForgotten = "heartbeat: the SuperLink does not recognize this SuperNode";
                } else {
                    Log.debug("heartbeat sent");
                }
            } catch (Retry.Stopped e) {
                return;
            } catch (FleetException e) {
                if (e.status == FORGOTTEN && current == node) {
                    heartbeatForgotten = e.getMessage();   // the main loop registers again
                } else {
                    Log.warn("Heartbeat failed: " + describe(e));
                }
            } catch (IOException e) {
                Log.warn("Heartbeat failed: " + describe(e));
            }
            // Flower: (interval - call timeout) * uniform(0.7, 0.9)
            double next = (heartbeatIntervalS - HEARTBEAT_CALL_TIMEOUT_S)
                * (HEARTBEAT_BASE_MULTIPLIER + (RANDOM.nextDouble() * 0.2 - 0.1));
            try {
                if (stop.await((long) (next * 1000), TimeUnit.MILLISECONDS)) {
                    return;
                }
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    // ------------------------------------------------------------ messages

    /** One PullMessages; if a message came, receive it, handle it and send the reply. True if one came. */
    boolean pullAndReply() throws IOException, FleetException, Retry.Stopped, InterruptedException {
        FleetOuterClass.PullMessagesResponse pulled = retry.invoke("PullMessages", () -> client.call("pull-messages",
            FleetOuterClass.PullMessagesRequest.newBuilder().setNode(node).build(),
            FleetOuterClass.PullMessagesResponse.parser(), 0));
        if (pulled.getMessagesListCount() == 0) {
            return false;
        }
        MessageOuterClass.Message header = pulled.getMessagesList(0);
        MessageOuterClass.ObjectTree tree = pulled.getMessageObjectTrees(0);
        long runId = header.getMetadata().getRunId();
        String messageId = header.getMetadata().getMessageId();
        Log.info("");
        Log.info("[RUN " + Unsigned.toString(runId)
            + (header.getMetadata().getGroupId().isEmpty() ? "" : ", ROUND " + header.getMetadata().getGroupId()) + "]");
        Log.info("Receiving: " + header.getMetadata().getMessageType() + " message (ID: " + messageId + ")");
        Message message;
        NodeContext context;
        try {
            context = new NodeContext(node.getNodeId(), runId, nodeConfig, runConfig(runId), dataDir);
            if (!tree.getObjectId().equals(messageId)) {
                throw new IllegalArgumentException("object tree root " + tree.getObjectId() + " is not message " + messageId);
            }
            Map<String, byte[]> objects = pullObjects(runId, tree);
            retry.invoke("ConfirmMessageReceived", () -> client.call("confirm-message-received",
                MessageOuterClass.ConfirmMessageReceivedRequest.newBuilder().setNode(node).setRunId(runId)
                    .setMessageObjectId(messageId).build(),
                MessageOuterClass.ConfirmMessageReceivedResponse.parser(), 0));
            message = Inflatable.inflateMessage(messageId, objects);
            Log.info("Received successfully");
        } catch (FleetException e) {
            if (e.status == 403) {
                Log.info("Run " + Unsigned.toString(runId) + " is not in RUNNING status. Ignoring message " + messageId + ".");
                return true;
            }
            Log.error("Failed to receive message " + messageId + ": " + e.getMessage());
            return true;
        } catch (IllegalArgumentException | IllegalStateException e) {
            Log.error("Failed to receive message " + messageId + ": " + e.getMessage());
            return true;
        }

        long started = System.nanoTime();
        Message reply;
        try {
            reply = handler.handle(message, context);
            if (reply == null || !messageId.equals(reply.metadata.replyToMessageId)) {
                throw new IllegalStateException("the handler's reply does not reply to message " + messageId);
            }
        } catch (Exception e) {
            Log.error("The handler raised " + describe(e));
            reply = Message.errorReply(message, new MessageError(MessageError.CLIENT_APP_RAISED_EXCEPTION,
                e.getClass().getName() + ":<'" + e.getMessage() + "'>"));
        }
        double runtime = (System.nanoTime() - started) / 1e9;
        send(reply, runtime);
        return true;
    }

    private Map<String, Object> runConfig(long runId) throws IOException, FleetException, Retry.Stopped {
        Map<String, Object> config = runs.get(runId);
        if (config == null) {
            RunOuterClass.GetRunResponse response = retry.invoke("GetRun", () -> client.call("get-run",
                RunOuterClass.GetRunRequest.newBuilder().setNode(node).setRunId(runId).build(),
                RunOuterClass.GetRunResponse.parser(), 0));
            config = new LinkedHashMap<>();
            for (Map.Entry<String, Transport.Scalar> e : response.getRun().getOverrideConfigMap().entrySet()) {
                config.put(e.getKey(), scalar(e.getValue()));
            }
            Log.info("Run " + Unsigned.toString(runId) + ": " + response.getRun().getFabId() + " "
                + response.getRun().getFabVersion() + " (FAB " + response.getRun().getFabHash() + ", not run here)");
            runs.put(runId, config);
        }
        return config;
    }

    private static Object scalar(Transport.Scalar s) {
        switch (s.getScalarCase()) {
            case DOUBLE: return s.getDouble();
            case UINT64: return Metadata.unsigned(s.getUint64());
            case SINT64: return s.getSint64();
            case BOOL: return s.getBool();
            case STRING: return s.getString();
            case BYTES: return s.getBytes().toByteArray();
            default: return null;
        }
    }

    /** Pull every object of the tree (children first), each checked against its SHA-256 id. */
    private Map<String, byte[]> pullObjects(long runId, MessageOuterClass.ObjectTree tree)
            throws IOException, FleetException, Retry.Stopped, InterruptedException {
        List<String> ids = new ArrayList<>();
        postOrder(tree, ids, new HashSet<String>());
        Map<String, byte[]> objects = new LinkedHashMap<>();
        for (String id : ids) {
            objects.put(id, pullObject(runId, id));
        }
        return objects;
    }

    private static void postOrder(MessageOuterClass.ObjectTree tree, List<String> out, Set<String> seen) {
        for (MessageOuterClass.ObjectTree child : tree.getChildrenList()) {
            postOrder(child, out, seen);
        }
        if (seen.add(tree.getObjectId())) {
            out.add(tree.getObjectId());
        }
    }

    private byte[] pullObject(long runId, String id) throws IOException, FleetException, Retry.Stopped, InterruptedException {
        MessageOuterClass.PullObjectRequest request = MessageOuterClass.PullObjectRequest.newBuilder()
            .setNode(node).setRunId(runId).setObjectId(id).build();
        double delay = PULL_INITIAL_BACKOFF_S;
        for (int tries = 1; ; tries++) {
            MessageOuterClass.PullObjectResponse r = retry.invoke("PullObject", () -> client.call("pull-object",
                request, MessageOuterClass.PullObjectResponse.parser(), 0));
            if (!r.getObjectFound()) {
                throw new IllegalStateException("object " + id + " could not be found");
            }
            if (r.getObjectAvailable()) {
                byte[] content = r.getObjectContent().toByteArray();
                Inflatable.verify(id, content);
                return content;
            }
            if (tries >= PULL_MAX_TRIES_PER_OBJECT) {
                throw new IllegalStateException("object " + id + " never became available");
            }
            double wait = delay * (1 + (RANDOM.nextDouble() * 0.4 - 0.2));
            if (stop.await((long) (wait * 1000), TimeUnit.MILLISECONDS)) {
                throw new Retry.Stopped();
            }
            delay = Math.min(delay * 2, PULL_BACKOFF_CAP_S);
        }
    }

    /** Push a reply: its metadata and object tree, then the objects the SuperLink does not have yet. */
    void send(Message handled, double clientappRuntime) throws IOException, FleetException, Retry.Stopped {
        Inflatable.Node root = Inflatable.deflate(handled);
        Message reply = handled.withMetadata(handled.metadata.withMessageId(root.id));
        Log.info("");
        Log.info("Sending: " + reply.metadata.messageType + " message (ID: " + root.id + ")");
        MessageOuterClass.Message.Builder proto = MessageOuterClass.Message.newBuilder()
            .setMetadata(Inflatable.Protos.metadata(reply.metadata));
        if (reply.hasContent()) {
            proto.setContent(Recorddict.RecordDict.getDefaultInstance()); // content travels as objects
        } else {
            proto.setError(Inflatable.Protos.error(reply.error()));
        }
        FleetOuterClass.PushMessagesRequest request = FleetOuterClass.PushMessagesRequest.newBuilder()
            .setNode(node).addMessagesList(proto).addMessageObjectTrees(root.tree())
            .addClientappRuntimeList(clientappRuntime).build();
        FleetOuterClass.PushMessagesResponse response;
        int[] pushAttempts = {0};
        try {
            response = retry.invoke("PushMessages", () -> {
                pushAttempts[0]++;
                return client.call("push-messages", request, FleetOuterClass.PushMessagesResponse.parser(), 0);
            });
        } catch (FleetException e) {
            if (e.status == 403) {
                Log.info("Run " + Unsigned.toString(reply.metadata.runId) + " is not in RUNNING status. Ignoring reply.");
                return;
            }
            throw e;
        }
        // A PushMessages retried after a failure may have reached the SuperLink the first time, its answer
        // lost: the message is stored then, its objects await a push session this node never heard of, and
        // the retry's answer asks for nothing. So after a retry every object the answer does not list is
        // pushed too, without a session id: the SuperLink then finds the session that awaits it, and says
        // "not stored" for one that it already has (or that no session awaits).
        boolean retried = pushAttempts[0] > 1;
        Set<String> wanted = new HashSet<>(response.getObjectsToPushList());
        int pushed = 0;
        long bytes = 0;
        for (Map.Entry<String, byte[]> e : root.objects().entrySet()) {
            boolean listed = wanted.contains(e.getKey());
            if (!listed && !retried) {
                continue;
            }
            MessageOuterClass.PushObjectRequest push = MessageOuterClass.PushObjectRequest.newBuilder()
                .setNode(node).setRunId(reply.metadata.runId).setObjectId(e.getKey())
                .setObjectContent(ByteString.copyFrom(e.getValue()))
                .setSessionId(listed ? response.getSessionId() : "").build();
            int[] attempts = {0};
            MessageOuterClass.PushObjectResponse r = retry.invoke("PushObject", () -> {
                attempts[0]++;
                return client.call("push-object", push, MessageOuterClass.PushObjectResponse.parser(), 0);
            });
            if (!r.getStored()) {
                if (attempts[0] > 1 || !listed) {
                    // stored by an attempt whose answer was lost, or already there: nothing left to push
                    Log.debug("object " + e.getKey() + " not stored again (" + attempts[0] + " attempts, "
                        + (listed ? "listed" : "not listed") + ")");
                    continue;
                }
                throw new IllegalStateException("the SuperLink did not store object " + e.getKey()
                    + " (push session " + response.getSessionId() + " expired or replaced?)");
            }
            pushed++;
            bytes += e.getValue().length;
        }
        Log.info("Sent successfully (" + pushed + " objects, " + bytes + " bytes)");
    }

    static BigInteger id(long v) {
        return Metadata.unsigned(v);
    }
}
