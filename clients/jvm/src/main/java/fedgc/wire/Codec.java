package fedgc.wire;

import fedgc.supernode.Unsigned;

import fedgc.supernode.Array;
import fedgc.supernode.ArrayRecord;
import fedgc.supernode.ConfigRecord;
import fedgc.supernode.Npy;
import fedgc.supernode.Record;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The update wire format, version 1 (docs/wire-format.md v2) and version 3 ("Format v3": Golomb–Rice
 * index blocks, value encodings), byte for byte as fedgc's Python codec
 * ({@code fedgc/wire/codec.py}, {@code fedgc/wire/varint.py}, {@code golomb.py}, {@code quantize.py};
 * the ArrayRecord envelope is {@code fedgc/flower/update_record.py}): {@link #encode} writes the blob
 * (version 1, or {@link #encode(List, int, String, long)} for either version),
 * {@link #decode} validates one (version 1 or 3) against the model's parameter shapes and throws
 * {@link CodecException} with the reason the Python codec gives for the same bytes: fields are read
 * and checked one at a time, the first failing check names the reason. In a Flower message the blob
 * travels under the record key {@code update} (a reply) or {@code model-delta} (a download) in one of
 * two forms (docs/wire-format.md, "Framing"): a v3 blob of at most {@link #MAX_COMPACT_BYTES} as the
 * one bytes value {@code blob} of a ConfigRecord (the compact form), any other as the 1-D uint8
 * {@code .npy} array {@code update} of an ArrayRecord ({@link #toUpdateRecord} picks;
 * {@link #fromUpdateRecord} reads both).
 */
public final class Codec {
    public static final String UPDATE_KEY = "update";
    /** The one item of a compact update record (docs/wire-format.md, "The compact form (v3)"). */
    public static final String BLOB_KEY = "blob";
    /** The largest v3 blob sent in the compact form; a larger one travels in an ArrayRecord, which Flower chunks. */
    public static final int MAX_COMPACT_BYTES = 1 << 20;
    public static final int VERSION = 1;
    /** Wire format v3 (docs/wire-format.md, "Format v3"); version byte 2 is never written. */
    public static final int VERSION_V3 = 3;
    public static final int MAX_QSGD_LEVELS = 32767;
    static final int MAX_VARINT_BYTES = 10;

    private Codec() {}

    // ------------------------------------------------------------------------------------ encode

    /** The update blob: version byte, then each payload's kind and body, in the model's parameter order. */
    public static byte[] encode(List<? extends Payload> payloads) {
        return encode(payloads, VERSION, null, 0);
    }

    /**
     * The update blob in {@code version} 1 or {@link #VERSION_V3}, as fedgc's
     * {@code encode_bytes(payloads, version, values, block)}. In version 3, {@code values} picks the
     * encoding of every sparse entry's values ({@code "fp32"}, {@code "fp16"}, {@code "int8"},
     * {@code "int4"}, {@code "sign"}; null: as each payload holds them: a {@link Payload.CodedSparse}
     * its own codes, a {@link Payload.Sparse} fp32 or fp16 by its dtype) and {@code block} the values
     * per scale of the scaled ones (unsigned 64-bit; 0: one scale per tensor); what the receiver sees
     * of the values is {@link Quantize#quantize}. Version 1 takes no {@code values}.
     */
    public static byte[] encode(List<? extends Payload> payloads, int version, String values, long block) {
        if (version != VERSION && version != VERSION_V3) {
            throw new IllegalArgumentException("wire format version " + version + ": one of 1, 3");
        }
        if (version == VERSION && values != null) {
            throw new IllegalArgumentException("value encodings need version 3; version 1 sends each payload's values as they are");
        }
        if (values != null) {
            Quantize.code(values); // an unknown name is refused before anything is written
        }
        int estimate = 1;
        for (Payload p : payloads) {
            estimate += 16 + (p.kind() == Payload.SPARSE ? 9 * p.elements() : 4 * p.numel / 8);
        }
        ByteSink out = new ByteSink(estimate);
        out.u8(version);
        for (Payload p : payloads) {
            if (version == VERSION_V3) {
                bodyV3(out, p, values, block);
            } else {
                body(out, p);
            }
        }
        return out.toByteArray();
    }

    /** Version 3 bodies: sparse and stc with a Rice index block, sparse values encoded; the rest as version 1. */
    private static void bodyV3(ByteSink out, Payload payload, String values, long block) {
        if (payload.kind() == Payload.STC) {
            Payload.Stc p = (Payload.Stc) payload;
            out.u8(Payload.STC);
            out.f32(p.scale);
            Rice.encode(out, p.indices, p.numel);
            out.bytes(p.signs);
            return;
        }
        if (payload.kind() != Payload.SPARSE) {
            body(out, payload);
            return;
        }
        Payload coded = coded(payload, values, block);
        int[] indices;
        int encoding;
        if (coded instanceof Payload.CodedSparse) {
            indices = ((Payload.CodedSparse) coded).indices;
            encoding = ((Payload.CodedSparse) coded).encoding;
        } else {
            indices = ((Payload.Sparse) coded).indices;
            encoding = ((Payload.Sparse) coded).dtype == Payload.F16 ? Quantize.FP16 : Quantize.FP32;
        }
        out.u8(Payload.SPARSE);
        out.u8(encoding);
        Rice.encode(out, indices, coded.numel);
        if (indices.length == 0) {
            return;
        }
        if (!(coded instanceof Payload.CodedSparse)) {
            values(out, ((Payload.Sparse) coded).dtype, ((Payload.Sparse) coded).values);
            return;
        }
        Payload.CodedSparse c = (Payload.CodedSparse) coded;
        out.varint(c.block);
        values(out, Payload.F32, c.scales);
        int k = c.codes.length;
        if (c.encoding == Quantize.INT8) {
            out.bytes(c.codes);
        } else if (c.encoding == Quantize.INT4) {
            for (int j = 0; j < k; j += 2) {
                int high = j + 1 < k ? c.codes[j + 1] & 0x0f : 0;
                out.u8((c.codes[j] & 0x0f) | high << 4);
            }
        } else {
            byte[] bits = new byte[(k + 7) / 8];
            for (int j = 0; j < k; j++) {
                bits[j >>> 3] |= (byte) (c.codes[j] << (j & 7));
            }
            out.bytes(bits);
        }
    }

    /** The wire form of a sparse payload's values: as they are ({@code values} null), or re-encoded. */
    private static Payload coded(Payload payload, String values, long block) {
        if (payload instanceof Payload.CodedSparse) {
            Payload.CodedSparse c = (Payload.CodedSparse) payload;
            if (values == null || (Quantize.code(values) == c.encoding && block == c.block)) {
                return c;
            }
            return Quantize.wire(c.indices, c.values, values, block, c.shape);
        }
        Payload.Sparse p = (Payload.Sparse) payload;
        String encoding = values != null ? values : (p.dtype == Payload.F16 ? "fp16" : "fp32");
        return Quantize.wire(p.indices, p.values, encoding, block, p.shape);
    }

    private static void values(ByteSink out, int dtype, float[] values) {
        for (float v : values) {
            if (dtype == Payload.F32) {
                out.f32(v);
            } else {
                out.f16(v);
            }
        }
    }

    private static void body(ByteSink out, Payload payload) {
        out.u8(payload.kind());
        switch (payload.kind()) {
            case Payload.DENSE: {
                Payload.Dense p = (Payload.Dense) payload;
                out.u8(p.dtype);
                values(out, p.dtype, p.values);
                return;
            }
            case Payload.SPARSE: {
                if (payload instanceof Payload.CodedSparse) { // version 1 has no value encodings: fp32
                    Payload.CodedSparse p = (Payload.CodedSparse) payload;
                    out.u8(Payload.F32);
                    indices(out, p.indices, p.numel);
                    values(out, Payload.F32, p.values);
                    return;
                }
                Payload.Sparse p = (Payload.Sparse) payload;
                out.u8(p.dtype);
                indices(out, p.indices, p.numel);
                values(out, p.dtype, p.values);
                return;
            }
            case Payload.SIGN: {
                Payload.Sign p = (Payload.Sign) payload;
                out.f32(p.pos);
                out.f32(p.neg);
                out.bytes(p.signs);
                return;
            }
            case Payload.VOTE: {
                Payload.Vote p = (Payload.Vote) payload;
                out.f32(p.scale);
                out.bytes(p.signs);
                return;
            }
            case Payload.TERNARY: {
                Payload.Ternary p = (Payload.Ternary) payload;
                out.f32(p.scale);
                out.bytes(p.trits);
                return;
            }
            case Payload.QSGD: {
                Payload.Qsgd p = (Payload.Qsgd) payload;
                out.varint(p.levels);
                out.varint(p.bucket);
                values(out, Payload.F32, p.norms);
                out.bytes(p.codes);
                return;
            }
            case Payload.NATURAL: {
                Payload.Natural p = (Payload.Natural) payload;
                out.bytes(p.exponents);
                out.bytes(p.signs);
                return;
            }
            case Payload.LOWRANK: {
                Payload.LowRank p = (Payload.LowRank) payload;
                out.u8(p.dtype);
                out.varint(p.rank);
                values(out, p.dtype, p.p);
                values(out, p.dtype, p.q);
                return;
            }
            case Payload.STC: {
                Payload.Stc p = (Payload.Stc) payload;
                out.f32(p.scale);
                indices(out, p.indices, p.numel);
                out.bytes(p.signs);
                return;
            }
            default:
                throw new IllegalArgumentException("no wire format for kind " + payload.kind());
        }
    }

    static int varintLength(long v) {
        int n = 1;
        while ((v & ~0x7fL) != 0) {
            v >>>= 7;
            n++;
        }
        return n;
    }

    /** Index block: mode 0 (varint k, then gaps) unless the bitmap (mode 1) is strictly shorter. */
    static void indices(ByteSink out, int[] indices, int numel) {
        long varintBytes = varintLength(indices.length);
        int previous = -1;
        for (int index : indices) {
            if (index <= previous || index >= numel) {
                throw new IllegalArgumentException("indices must be strictly increasing and below " + numel);
            }
            varintBytes += varintLength(index - previous - 1);
            previous = index;
        }
        if (varintBytes <= (numel + 7L) / 8) {
            out.u8(0);
            out.varint(indices.length);
            previous = -1;
            for (int index : indices) {
                out.varint(index - previous - 1);
                previous = index;
            }
        } else {
            byte[] bits = new byte[(numel + 7) / 8];
            for (int index : indices) {
                bits[index >>> 3] |= (byte) (1 << (index & 7));
            }
            out.u8(1);
            out.bytes(bits);
        }
    }

    /** The ArrayRecord form of an update record: one 1-D uint8 array {@code update} holding the blob. */
    public static ArrayRecord toRecord(byte[] blob) {
        ArrayRecord record = new ArrayRecord();
        record.put(UPDATE_KEY, Array.fromRaw("uint8", new long[] {blob.length}, blob));
        return record;
    }

    /**
     * The update record of {@code blob} in the form fedgc's {@code encode_update} picks: a blob of
     * version 3 (its first byte) of at most {@link #MAX_COMPACT_BYTES} in the compact form, a
     * {@link ConfigRecord} holding the blob as one bytes value under {@link #BLOB_KEY}; any other (version
     * 1, or a larger v3 blob, which Flower chunks) in the ArrayRecord form ({@link #toRecord}).
     */
    public static Record toUpdateRecord(byte[] blob) {
        if (blob.length > 0 && (blob[0] & 0xff) == VERSION_V3 && blob.length <= MAX_COMPACT_BYTES) {
            ConfigRecord record = new ConfigRecord();
            record.put(BLOB_KEY, blob);
            return record;
        }
        return toRecord(blob);
    }

    // ------------------------------------------------------------------------------------ decode

    /**
     * Validate and decode an update record in either form, whatever its blob's version: a
     * {@link ConfigRecord} ({@link #compactBlob}) or an {@link ArrayRecord} ({@link #fromRecord});
     * any other record is {@code bad-record}.
     */
    public static List<Payload> fromUpdateRecord(Record record, List<long[]> shapes) throws CodecException {
        if (record instanceof ConfigRecord) {
            return decode(compactBlob((ConfigRecord) record), shapes);
        }
        if (record instanceof ArrayRecord) {
            return fromRecord((ArrayRecord) record, shapes);
        }
        throw new CodecException("bad-record", "expected an ArrayRecord or a ConfigRecord, got "
            + (record == null ? "none" : record.getClass().getSimpleName()));
    }

    /**
     * The blob of a compact update record: exactly one item, {@link #BLOB_KEY}, whose value is one bytes
     * value of at most {@link #MAX_COMPACT_BYTES}; else {@code bad-record} (another key, a second item, a
     * string, a list, a number), before any byte of the blob is read.
     */
    public static byte[] compactBlob(ConfigRecord record) throws CodecException {
        if (record.size() != 1 || !record.containsKey(BLOB_KEY)) {
            List<String> keys = new ArrayList<>();
            for (String key : record.keySet()) {
                if (keys.size() == 4) {
                    break;
                }
                keys.add(key);
            }
            throw new CodecException("bad-record", "expected one bytes value '" + BLOB_KEY + "', got keys " + keys);
        }
        Object value = record.get(BLOB_KEY);
        if (!(value instanceof byte[])) {
            throw new CodecException("bad-record", "'" + BLOB_KEY + "' is " + typeName(value) + ", expected bytes");
        }
        byte[] blob = (byte[]) value;
        if (blob.length > MAX_COMPACT_BYTES) {
            throw new CodecException("bad-record", "a compact update of " + blob.length + " bytes > " + MAX_COMPACT_BYTES);
        }
        return blob;
    }

    /** A ConfigRecord value's type as Python names it (what fedgc's Python receiver says of it). */
    private static String typeName(Object value) {
        if (value instanceof String) {
            return "str";
        }
        if (value instanceof List) {
            return "list";
        }
        if (value instanceof Boolean) {
            return "bool";
        }
        if (value instanceof Double || value instanceof Float) {
            return "float";
        }
        if (value instanceof Number) {
            return "int";
        }
        return value == null ? "NoneType" : value.getClass().getSimpleName();
    }

    /** Validate and decode an {@code update} record against the model's parameter shapes (in order). */
    public static List<Payload> fromRecord(ArrayRecord record, List<long[]> shapes) throws CodecException {
        if (record.size() != 1 || !record.containsKey(UPDATE_KEY)) {
            throw new CodecException("bad-record", "expected one array 'update', got " + record.keySet());
        }
        Array array = record.get(UPDATE_KEY);
        if (!"uint8".equals(array.dtype) || array.shape.length != 1) {
            throw new CodecException("bad-dtype", "update array is " + array.dtype + " "
                + Npy.shapeRepr(array.shape) + ", expected 1-D uint8");
        }
        byte[] raw;
        try {
            raw = array.npy().raw;
        } catch (RuntimeException err) {
            throw new CodecException("bad-array", String.valueOf(err.getMessage()));
        }
        return decode(raw, shapes);
    }

    /** Convenience: shapes given as name → shape, in the model's order. */
    public static List<Payload> decode(byte[] blob, Map<String, long[]> shapes) throws CodecException {
        return decode(blob, new ArrayList<>(shapes.values()));
    }

    /** Validate and decode an update blob (version 1 or 3) against the model's parameter shapes (in order). */
    public static List<Payload> decode(byte[] blob, List<long[]> shapes) throws CodecException {
        Reader r = new Reader(blob);
        int version = blob.length > 0 ? r.take(1)[0] & 0xff : -1;
        if (version != VERSION && version != VERSION_V3) {
            throw new CodecException("bad-version", "format version " + version + ", expected one of (1, 3)");
        }
        List<Payload> out = new ArrayList<>(shapes.size());
        int index = 0;
        for (long[] shape : shapes) {
            r.name = "parameter " + index++;
            int kind = r.take(1)[0] & 0xff;
            out.add(version == VERSION_V3 ? decodeOneV3(r, kind, shape) : decodeOne(r, kind, shape));
        }
        if (r.pos != blob.length) {
            throw new CodecException("trailing-bytes", (blob.length - r.pos) + " bytes after the last parameter");
        }
        return out;
    }

    private static Payload decodeOne(Reader r, int kind, long[] shape) throws CodecException {
        int n = Payload.numel(shape);
        switch (kind) {
            case Payload.DENSE: {
                int dtype = r.dtype();
                return new Payload.Dense(dtype, r.floats(n, dtype), shape);
            }
            case Payload.SPARSE: {
                int dtype = r.dtype();
                int[] indices = r.indices(n);
                return new Payload.Sparse(dtype, indices, r.floats(indices.length, dtype), shape);
            }
            case Payload.SIGN:
            case Payload.VOTE: {
                float[] scales = r.scales(kind == Payload.SIGN ? 2 : 1);
                byte[] signs = r.bits(n);
                return kind == Payload.SIGN ? new Payload.Sign(signs, scales[0], scales[1], shape)
                    : new Payload.Vote(signs, scales[0], shape);
            }
            case Payload.TERNARY: {
                float scale = r.scales(1)[0];
                byte[] trits = r.take((n + 4) / 5);
                for (byte b : trits) {
                    if ((b & 0xff) > 242) {
                        throw new CodecException("bad-bits", r.name + ": trit byte above 242");
                    }
                }
                if (n % 5 != 0) {
                    int last = trits[trits.length - 1] & 0xff;
                    for (int t = 0; t < n % 5; t++) {
                        last /= 3;
                    }
                    if (last != 0) {
                        throw new CodecException("bad-bits", r.name + ": padding trits are not zero");
                    }
                }
                return new Payload.Ternary(trits, scale, shape);
            }
            case Payload.QSGD: {
                long levels = r.varint();
                if (Unsigned.compare(levels, 1) < 0 || Unsigned.compare(levels, MAX_QSGD_LEVELS) > 0) {
                    throw new CodecException("bad-levels", r.name + ": levels=" + Unsigned.toString(levels));
                }
                long bucket = r.varint();
                if (bucket == 0) {
                    throw new CodecException("bad-levels", r.name + ": bucket size 0");
                }
                // ceil(n / bucket) norms: a bucket longer than the tensor is one bucket
                int buckets = Unsigned.compare(bucket, n) >= 0 ? (n > 0 ? 1 : 0)
                    : (int) ((n + bucket - 1) / bucket);
                float[] norms = r.scales(buckets);
                int width = 32 - Integer.numberOfLeadingZeros(2 * (int) levels);
                long bits = (long) n * width;
                byte[] codes = r.take((int) ((bits + 7) / 8));
                int padding = (int) (codes.length * 8L - bits);
                if (padding > 0 && ((codes[codes.length - 1] & 0xff) >>> (8 - padding)) != 0) {
                    throw new CodecException("bad-bits", r.name + ": padding bits are not zero");
                }
                Payload.Qsgd payload = new Payload.Qsgd((int) levels, bucket, norms, codes, shape);
                for (int i = 0; i < n; i++) {
                    if (payload.code(i) > 2 * levels) {
                        throw new CodecException("bad-levels", r.name + ": code above 2·levels");
                    }
                }
                if (!finite(payload.toDense())) {
                    throw new CodecException("non-finite", r.name + ": norm x level overflows");
                }
                return payload;
            }
            case Payload.NATURAL: {
                byte[] exponents = r.take(n);
                for (byte e : exponents) {
                    if ((e & 0xff) == 255) {
                        throw new CodecException("non-finite", r.name + ": exponent 255 (Inf/NaN)");
                    }
                }
                return new Payload.Natural(exponents, r.bits(n), shape);
            }
            case Payload.LOWRANK: {
                int dtype = r.dtype();
                int rows = shape.length == 0 ? 1 : (int) shape[0];
                int cols = rows == 0 ? 0 : n / rows;
                long rank = r.varint();
                if (Unsigned.compare(rank, 1) < 0 || Unsigned.compare(rank, Math.min(rows, cols)) > 0) {
                    throw new CodecException("bad-rank", r.name + ": rank " + Unsigned.toString(rank) + " for a "
                        + rows + "x" + cols + " matrix");
                }
                float[] p = r.floats(rows * (int) rank, dtype);
                float[] q = r.floats(cols * (int) rank, dtype);
                Payload.LowRank payload = new Payload.LowRank(dtype, (int) rank, p, q, shape);
                if (!finite(payload.toDense())) {
                    throw new CodecException("non-finite", r.name + ": P·Qᵀ overflows");
                }
                return payload;
            }
            case Payload.STC: {
                float scale = r.scales(1)[0];
                int[] indices = r.indices(n);
                return new Payload.Stc(scale, indices, r.bits(indices.length), shape);
            }
            default:
                throw new CodecException("bad-kind", r.name + ": unknown payload kind " + kind);
        }
    }

    /** Version 3 entries: sparse and stc bodies are v3's, every other kind is version 1's. */
    private static Payload decodeOneV3(Reader r, int kind, long[] shape) throws CodecException {
        int n = Payload.numel(shape);
        if (kind == Payload.STC) {
            float scale = r.scales(1)[0];
            int[] indices = r.rice(n);
            return new Payload.Stc(scale, indices, r.bits(indices.length), shape);
        }
        if (kind != Payload.SPARSE) {
            return decodeOne(r, kind, shape);
        }
        int encoding = r.take(1)[0] & 0xff;
        if (encoding >= Quantize.ENCODINGS.length) {
            throw new CodecException("bad-dtype", r.name + ": value encoding code " + encoding);
        }
        int[] indices = r.rice(n);
        int k = indices.length;
        if (encoding == Quantize.FP32 || encoding == Quantize.FP16) {
            int dtype = encoding == Quantize.FP16 ? Payload.F16 : Payload.F32;
            return new Payload.Sparse(dtype, indices, r.floats(k, dtype), shape);
        }
        if (k == 0) {
            return new Payload.CodedSparse(encoding, 0, indices, new byte[0], new float[0], shape);
        }
        long block = r.varint();
        float[] scales = r.scales(Quantize.blockCount(k, block));
        byte[] raw = r.take(Quantize.codeBytes(encoding, k));
        byte[] codes;
        if (encoding == Quantize.SIGN) {
            if (k % 8 != 0 && ((raw[raw.length - 1] & 0xff) >>> (k % 8)) != 0) {
                throw new CodecException("bad-bits", r.name + ": padding bits are not zero");
            }
            codes = new byte[k];
            for (int j = 0; j < k; j++) {
                codes[j] = (byte) (raw[j >>> 3] >>> (j & 7) & 1);
            }
        } else {
            if (encoding == Quantize.INT4) {
                if (k % 2 != 0 && (raw[raw.length - 1] & 0xf0) != 0) {
                    throw new CodecException("bad-bits", r.name + ": int4 padding nibble set");
                }
                codes = new byte[k];
                for (int j = 0; j < k; j++) {
                    int nibble = (raw[j >>> 1] & 0xff) >>> (4 * (j & 1)) & 0x0f;
                    codes[j] = (byte) (nibble >= 8 ? nibble - 16 : nibble); // 4-bit two's complement
                }
            } else {
                codes = raw;
            }
            int levels = Quantize.levels(encoding);
            for (byte c : codes) {
                if (c < -levels || c > levels) { // −128 (int8), −8 (int4)
                    throw new CodecException("bad-levels", r.name + ": an " + Quantize.ENCODINGS[encoding]
                        + " code outside ±" + levels);
                }
            }
        }
        Payload.CodedSparse payload = new Payload.CodedSparse(encoding, block, indices, codes, scales, shape);
        if (!finite(payload.values)) { // a finite scale near the f32 maximum times a code can overflow
            throw new CodecException("non-finite", r.name + ": code x scale overflows");
        }
        return payload;
    }

    static boolean finite(float[] values) {
        for (float v : values) {
            if (Float.isNaN(v) || Float.isInfinite(v)) {
                return false;
            }
        }
        return true;
    }

    /** Reads fields off the blob; every count is checked against the bytes that are there. */
    private static final class Reader {
        final byte[] data;
        int pos;
        String name = "";

        Reader(byte[] data) {
            this.data = data;
        }

        byte[] take(long count) throws CodecException {
            if (count < 0 || pos + count > data.length) {
                throw new CodecException("truncated", name + ": needs " + count + " bytes at offset " + pos);
            }
            byte[] out = new byte[(int) count];
            System.arraycopy(data, pos, out, 0, (int) count);
            pos += (int) count;
            return out;
        }

        int dtype() throws CodecException {
            int code = take(1)[0] & 0xff;
            if (code != Payload.F32 && code != Payload.F16) {
                throw new CodecException("bad-dtype", name + ": value dtype code " + code);
            }
            return code;
        }

        float[] floats(int count, int dtype) throws CodecException {
            int size = dtype == Payload.F32 ? 4 : 2;
            byte[] raw = take((long) count * size);
            float[] out = new float[count];
            for (int i = 0, b = 0; i < count; i++, b += size) {
                float v;
                if (size == 4) {
                    v = Float.intBitsToFloat((raw[b] & 0xff) | (raw[b + 1] & 0xff) << 8 | (raw[b + 2] & 0xff) << 16
                        | (raw[b + 3] & 0xff) << 24);
                } else {
                    v = Half.toFloat((short) ((raw[b] & 0xff) | (raw[b + 1] & 0xff) << 8));
                }
                out[i] = v;
            }
            if (!finite(out)) {
                throw new CodecException("non-finite", name + " holds NaN or Inf");
            }
            return out;
        }

        float[] scales(int count) throws CodecException {
            float[] values = floats(count, Payload.F32);
            for (float v : values) {
                if (v < 0) {
                    throw new CodecException("negative-scale", name + " has a negative scale");
                }
            }
            return values;
        }

        /** A bit array of {@code n} bits (padding must be zero). */
        byte[] bits(int n) throws CodecException {
            byte[] out = take((n + 7L) / 8);
            if (n % 8 != 0 && ((out[out.length - 1] & 0xff) >>> (n % 8)) != 0) {
                throw new CodecException("bad-bits", name + ": padding bits are not zero");
            }
            return out;
        }

        /** One varint of the entry's header (levels, bucket size, rank). */
        long varint() throws CodecException {
            long[] values = new long[1];
            try {
                pos += Varints.read(data, pos, data.length, values, 1);
            } catch (Varints.TooLong err) {
                throw new CodecException("bad-varint", name + ": " + err.getMessage());
            } catch (Varints.Truncated err) {
                throw new CodecException("truncated", name + ": " + err.getMessage());
            }
            return values[0];
        }

        /** A version 3 (Golomb–Rice) index block of a parameter with {@code numel} entries ({@link Rice}). */
        int[] rice(int numel) throws CodecException {
            int[] end = new int[1];
            int[] indices = Rice.decode(data, pos, numel, name, end);
            pos = end[0];
            return indices;
        }

        /** An index block (docs/wire-format.md) of a parameter with {@code numel} entries. */
        int[] indices(int numel) throws CodecException {
            try {
                if (pos >= data.length) {
                    throw new CodecException("truncated", name + ": no index mode byte");
                }
                int mode = data[pos] & 0xff;
                int start = pos + 1;
                if (mode == 0) {
                    long[] count = new long[1];
                    int used = Varints.read(data, start, data.length, count, 1);
                    if (Unsigned.compare(count[0], numel) > 0) {
                        throw new CodecException("bad-indices", name + ": " + Unsigned.toString(count[0])
                            + " indices for " + numel + " entries");
                    }
                    int k = (int) count[0];
                    // gap by gap: the first gap that is cut, too long or out of bounds names the reason
                    long[] gap = new long[1];
                    int[] indices = new int[k];
                    long index = -1;
                    for (int j = 0; j < k; j++) {
                        used += Varints.read(data, start + used, data.length, gap, 1);
                        if (Unsigned.compare(gap[0], numel) >= 0) {
                            throw new CodecException("bad-indices", name + ": index out of bounds");
                        }
                        index += gap[0] + 1;
                        if (index >= numel) {
                            throw new CodecException("bad-indices", name + ": index out of bounds");
                        }
                        indices[j] = (int) index;
                    }
                    pos = start + used;
                    return indices;
                }
                if (mode == 1) {
                    int used = (int) ((numel + 7L) / 8);
                    if (data.length - start < used) {
                        throw new CodecException("truncated", name + ": bitmap has " + (data.length - start)
                            + " bytes, expected " + used);
                    }
                    if (numel % 8 != 0 && ((data[start + used - 1] & 0xff) >>> (numel % 8)) != 0) {
                        throw new CodecException("bad-indices", name + ": bitmap sets bits past the tensor's end");
                    }
                    int k = 0;
                    for (int b = 0; b < used; b++) {
                        k += Integer.bitCount(data[start + b] & 0xff);
                    }
                    int[] indices = new int[k];
                    for (int i = 0, j = 0; j < k; i++) {
                        if ((data[start + (i >>> 3)] >>> (i & 7) & 1) != 0) {
                            indices[j++] = i;
                        }
                    }
                    pos = start + used;
                    return indices;
                }
                throw new CodecException("bad-indices", name + ": unknown index mode " + mode);
            } catch (Varints.TooLong err) {
                throw new CodecException("bad-varint", name + ": " + err.getMessage());
            } catch (Varints.Truncated err) {
                throw new CodecException("truncated", name + ": " + err.getMessage());
            }
        }
    }
}
