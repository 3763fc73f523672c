package fedgc.compress;

import fedgc.supernode.ArrayRecord;
import fedgc.supernode.Record;

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

    /**
     * The blob version these payloads travel in, as fedgc's {@code wire_version}: {@link Codec#VERSION_V3}
     * when a sparse payload's values are coded (value dtype int8, int4 or sign), else 1.
     */
    public int version() {
        for (Payload p : payloads.values()) {
            if (p instanceof Payload.CodedSparse) {
                return Codec.VERSION_V3;
            }
        }
        return Codec.VERSION;
    }

    /** The update blob (docs/wire-format.md) in {@link #version}, each coded payload with its own codes and scales. */
    public byte[] encode() {
        return Codec.encode(new ArrayList<>(payloads.values()), version(), null, 0);
    }

    /** The blob in the ArrayRecord form of an update record, whatever its version ({@link Codec#toRecord}). */
    public ArrayRecord toRecord() {
        return Codec.toRecord(encode());
    }

    /** The reply's {@code update} record, in the form fedgc's Python client writes ({@link Codec#toUpdateRecord}). */
    public Record toUpdateRecord() {
        return Codec.toUpdateRecord(encode());
    }
}
