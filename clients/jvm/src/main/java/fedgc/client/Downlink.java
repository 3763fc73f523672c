package fedgc.client;

import fedgc.supernode.Array;
import fedgc.supernode.ArrayRecord;
import fedgc.supernode.ConfigRecord;
import fedgc.supernode.Npy;
import fedgc.supernode.Record;
import fedgc.supernode.RecordDict;

import fedgc.compress.Tensor;
import fedgc.wire.Codec;
import fedgc.wire.CodecException;
import fedgc.wire.Payload;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * fedgc's downlink on the client ({@code docs/downlink.md}), split out of {@link FedgcHandler}: the
 * replica of the global model the node holds, the compressed differences applied to it (blob version
 * 1, or 3 for a download whose {@code downlink.value_dtype} is int8, int4 or sign; {@code model-delta}
 * in either record form, the compact ConfigRecord or the ArrayRecord: {@link Codec#fromUpdateRecord}
 * decodes them all), and {@code model_digest}, equal to Python's bit for bit ({@code tests/vectors/downlink}).
 */
final class Downlink {
    private Downlink() {}

    /**
     * The round's global model from a train message: a compressed difference ({@code model-delta},
     * checked against the replica's digest before and the server's digest after, then adopted as the
     * replica), or the whole model ({@code arrays}; adopted as the replica when {@code downlink-reset}
     * says so). A refused download leaves the replica as it was.
     */
    static LinkedHashMap<String, Tensor> apply(RecordDict content, ConfigRecord config, FedgcState st) throws FedgcHandler.Refused {
        if (content.containsKey(FedgcHandler.DELTA_KEY)) {
            if (!(config.get(FedgcHandler.BASE_DIGEST) instanceof String) || !(config.get(FedgcHandler.NEW_DIGEST) instanceof String)) {
                throw new FedgcHandler.Refused("a compressed download without its replica digests");
            }
            if (st.replica == null) {
                throw new FedgcHandler.Refused("a compressed download, but this client holds no replica");
            }
            String have = digest(st.replica);
            if (!have.equals(config.get(FedgcHandler.BASE_DIGEST))) {
                throw new FedgcHandler.Refused("replica " + have + " is not the download's base " + config.get(FedgcHandler.BASE_DIGEST));
            }
            Record delta = content.get(FedgcHandler.DELTA_KEY);
            if (!(delta instanceof ArrayRecord) && !(delta instanceof ConfigRecord)) {
                throw new FedgcHandler.Refused("'" + FedgcHandler.DELTA_KEY + "' is neither an ArrayRecord nor a ConfigRecord");
            }
            List<long[]> shapes = new ArrayList<>();
            for (Tensor t : st.replica.values()) {
                shapes.add(t.shape);
            }
            List<Payload> payloads;
            try {
                payloads = Codec.fromUpdateRecord(delta, shapes); // either form, checked before the blob is read
            } catch (CodecException e) {
                throw new FedgcHandler.Refused("a malformed download: " + e.getMessage());
            }
            LinkedHashMap<String, Tensor> next = new LinkedHashMap<>();
            int i = 0;
            for (Map.Entry<String, Tensor> e : st.replica.entrySet()) {
                float[] x = payloads.get(i++).toDense();
                float[] base = e.getValue().data;
                float[] sum = new float[base.length];
                for (int j = 0; j < sum.length; j++) {
                    sum[j] = base[j] + x[j];
                }
                next.put(e.getKey(), new Tensor(e.getValue().shape, sum));
            }
            if (!digest(next).equals(config.get(FedgcHandler.NEW_DIGEST))) {
                throw new FedgcHandler.Refused("the replica after the download does not match the server's digest");
            }
            st.replica = next;
            return copy(next);
        }
        LinkedHashMap<String, Tensor> model = arrays(content);
        if (Boolean.TRUE.equals(config.get(FedgcHandler.RESET))) {
            if (st.replica != null) {
                boolean same = st.replica.keySet().equals(model.keySet());
                for (Map.Entry<String, Tensor> e : model.entrySet()) {
                    same = same && st.replica.containsKey(e.getKey())
                        && Arrays.equals(st.replica.get(e.getKey()).shape, e.getValue().shape);
                }
                if (!same) {
                    throw new FedgcHandler.Refused("a reset download whose tensors are not the model's");
                }
            }
            for (Tensor t : model.values()) {
                for (float v : t.data) {
                    if (Float.isNaN(v) || Float.isInfinite(v)) {
                        throw new FedgcHandler.Refused("a reset download with non-finite values");
                    }
                }
            }
            st.replica = copy(model);
        }
        return model;
    }

    /**
     * Whether the message holds a compressed download in blob version 3, in either form (false for
     * anything else, malformed included: {@link #apply} refuses it with the codec's reason).
     */
    static boolean isV3(RecordDict content) {
        Record delta = content.get(FedgcHandler.DELTA_KEY);
        if (delta instanceof ConfigRecord) {
            Object blob = ((ConfigRecord) delta).get(Codec.BLOB_KEY);
            return blob instanceof byte[] && ((byte[]) blob).length > 0 && (((byte[]) blob)[0] & 0xff) == Codec.VERSION_V3;
        }
        if (!(delta instanceof ArrayRecord)) {
            return false;
        }
        Array array = content.arrayRecord(FedgcHandler.DELTA_KEY).get(Codec.UPDATE_KEY);
        if (array == null || !"uint8".equals(array.dtype)) {
            return false;
        }
        try {
            byte[] raw = array.npy().raw;
            return raw.length > 0 && (raw[0] & 0xff) == Codec.VERSION_V3;
        } catch (RuntimeException e) {
            return false; // apply() refuses it with the codec's reason
        }
    }

    static LinkedHashMap<String, Tensor> arrays(RecordDict content) throws FedgcHandler.Refused {
        if (!(content.get("arrays") instanceof ArrayRecord)) {
            throw new FedgcHandler.Refused("the training message has no 'arrays' record (and no compressed download)");
        }
        LinkedHashMap<String, Tensor> model = new LinkedHashMap<>();
        for (Map.Entry<String, Array> e : content.arrayRecord("arrays").entrySet()) {
            try {
                model.put(e.getKey(), Tensor.fromArray(e.getValue()));
            } catch (RuntimeException err) {
                throw new FedgcHandler.Refused("arrays '" + e.getKey() + "': " + err.getMessage());
            }
        }
        return model;
    }

    static LinkedHashMap<String, Tensor> copy(LinkedHashMap<String, Tensor> model) {
        LinkedHashMap<String, Tensor> out = new LinkedHashMap<>();
        for (Map.Entry<String, Tensor> e : model.entrySet()) {
            out.put(e.getKey(), e.getValue().copy());
        }
        return out;
    }

    /**
     * fedgc's {@code model_digest}: SHA-256 over, for each name in code-point order, the UTF-8 name
     * followed by the shape as Python writes a tuple, then the values as little-endian float32; the
     * first 16 hex digits.
     */
    public static String digest(Map<String, Tensor> weights) {
        MessageDigest sha;
        try {
            sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        List<String> names = new ArrayList<>(weights.keySet());
        java.util.Collections.sort(names, Downlink::compareCodePoints);
        for (String name : names) {
            Tensor t = weights.get(name);
            sha.update((name + Npy.shapeRepr(t.shape)).getBytes(StandardCharsets.UTF_8));
            ByteBuffer raw = ByteBuffer.allocate(4 * t.data.length).order(ByteOrder.LITTLE_ENDIAN);
            raw.asFloatBuffer().put(t.data);
            sha.update(raw.array());
        }
        byte[] hash = sha.digest();
        StringBuilder hex = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            hex.append(String.format("%02x", hash[i] & 0xff));
        }
        return hex.toString();
    }

    /** Python's string order (by code point; Java's compareTo orders UTF-16 units). */
    static int compareCodePoints(String a, String b) {
        int i = 0, j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i), cb = b.codePointAt(j);
            if (ca != cb) {
                return ca < cb ? -1 : 1;
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return (a.length() - i) - (b.length() - j) == 0 ? 0 : (i < a.length() ? 1 : -1);
    }
}
