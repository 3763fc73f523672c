package fedgc.compress;

import fedgc.supernode.ArrayRecord;

import fedgc.wire.Codec;
import fedgc.wire.Payload;
import java.util.ArrayList;
import java.util.LinkedHashMap;

/** One round's compressed update: payloads in the model's order, what was sent (dense fp32), counts. */
public final class CompressedUpdate {
    public final LinkedHashMap<String, Payload> payloads;
    /** Dense fp32 view of what was sent, per parameter (what the server adds before weighting). */
    public final LinkedHashMap<String, float[]> sent;
    public final long elementsSent, elementsTotal;

    CompressedUpdate(LinkedHashMap<String, Payload> payloads, LinkedHashMap<String, float[]> sent,
                     long elementsSent, long elementsTotal) {
        this.payloads = payloads;
        this.sent = sent;
        this.elementsSent = elementsSent;
        this.elementsTotal = elementsTotal;
    }

    /** The update blob (docs/wire-format.md). */
    public byte[] encode() {
        return Codec.encode(new ArrayList<>(payloads.values()));
    }

    /** The reply's {@code update} record. */
    public ArrayRecord toRecord() {
        return Codec.toRecord(encode());
    }
}
