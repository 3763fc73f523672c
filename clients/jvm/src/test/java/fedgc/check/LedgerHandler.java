package fedgc.cli.check;

import fedgc.supernode.Message;
import fedgc.supernode.NodeContext;

import fedgc.client.FedgcHandler;
import fedgc.client.FedgcState;
import fedgc.compress.CompressedUpdate;
import fedgc.compress.Tensor;
import java.io.File;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * fedgc's handler with a ledger, for tests/test_jvm_e2e.py's fault test (test code, not in the client
 * jar): every round's update Δ and what was sent go to {@code $FEDGC_LEDGER_DIR/round-R.npz} (as
 * {@code memory/NAME} = Δ and {@code pending/NAME} = sent, in {@link FedgcState}'s format), so the test
 * can check that nothing the client produced is lost. With {@code FEDGC_HOLD_ROUND=R}, the handler
 * stops after it has trained, compressed and saved its state for round R, but before the reply leaves
 * (it prints {@code ledger: holding the reply of round R} and waits): the moment a crash costs the most.
 */
public final class LedgerHandler extends FedgcHandler {
    private final File dir = new File(System.getenv("FEDGC_LEDGER_DIR"));
    private final String hold = System.getenv("FEDGC_HOLD_ROUND");
    private long lastRound = -1;

    @Override
    protected void produced(long round, LinkedHashMap<String, Tensor> delta, CompressedUpdate update) throws IOException {
        FedgcState entry = new FedgcState();
        for (Map.Entry<String, Tensor> e : delta.entrySet()) {
            entry.memory.put(e.getKey(), e.getValue().data.clone());
        }
        entry.pending.putAll(update.sent);
        entry.save(new File(dir, "round-" + round + ".npz"));
        lastRound = round;
    }

    @Override
    public Message handle(Message message, NodeContext context) throws Exception {
        lastRound = -1;
        Message reply = super.handle(message, context);
        if (hold != null && lastRound == Long.parseLong(hold)) {
            System.err.println("ledger: holding the reply of round " + lastRound);
            System.err.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
        return reply;
    }
}
