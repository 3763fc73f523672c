package fedgc.supernode;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * NumPy's {@code .npy} format (version 1.0, C order, little-endian), as {@code np.save} writes it:
 * the header is byte-for-byte numpy 2's, so an array built here has the object id numpy would give it.
 */
public final class Npy {
    private static final byte[] MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};
    private static final int ARRAY_ALIGN = 64;
    private static final int GROWTH_AXIS_MAX_DIGITS = 21;
    private static final Map<String, String> DESCR = new HashMap<>();
    private static final Map<String, String> DTYPE = new HashMap<>();
    private static final Map<String, Integer> ITEMSIZE = new HashMap<>();

    static {
        String[][] table = {
            {"bool", "|b1", "1"}, {"int8", "|i1", "1"}, {"uint8", "|u1", "1"},
            {"int16", "<i2", "2"}, {"uint16", "<u2", "2"}, {"float16", "<f2", "2"},
            {"int32", "<i4", "4"}, {"uint32", "<u4", "4"}, {"float32", "<f4", "4"},
            {"int64", "<i8", "8"}, {"uint64", "<u8", "8"}, {"float64", "<f8", "8"},
        };
        for (String[] row : table) {
            DESCR.put(row[0], row[1]);
            DTYPE.put(row[1], row[0]);
            ITEMSIZE.put(row[0], Integer.parseInt(row[2]));
        }
    }

    private Npy() {}

    /** Bytes per element of a numpy dtype name ("float32" → 4). */
    public static int itemSize(String dtype) {
        Integer size = ITEMSIZE.get(dtype);
        if (size == null) {
            throw new IllegalArgumentException("unsupported dtype: " + dtype);
        }
        return size;
    }

    /** Number of elements of an array of this shape. */
    public static long count(long[] shape) {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    /** The {@code .npy} file of an array: dtype name, shape, raw little-endian C-order data. */
    public static byte[] encode(String dtype, long[] shape, byte[] raw) {
        String descr = DESCR.get(dtype);
        if (descr == null) {
            throw new IllegalArgumentException("unsupported dtype: " + dtype);
        }
        if (raw.length != count(shape) * itemSize(dtype)) {
            throw new IllegalArgumentException("data has " + raw.length + " bytes, shape "
                + shapeRepr(shape) + " of " + dtype + " needs " + count(shape) * itemSize(dtype));
        }
        StringBuilder header = new StringBuilder();
        header.append("{'descr': '").append(descr).append("', 'fortran_order': False, 'shape': ")
            .append(shapeRepr(shape)).append(", }");
        if (shape.length > 0) { // numpy leaves room to grow the first axis in place
            for (int i = Long.toString(shape[0]).length(); i < GROWTH_AXIS_MAX_DIGITS; i++) {
                header.append(' ');
            }
        }
        int hlen = header.length() + 1;
        int padlen = ARRAY_ALIGN - ((MAGIC.length + 2 + 2 + hlen) % ARRAY_ALIGN);
        for (int i = 0; i < padlen; i++) {
            header.append(' ');
        }
        header.append('\n');
        byte[] head = header.toString().getBytes(StandardCharsets.ISO_8859_1);
        if (head.length > 65535) {
            throw new IllegalArgumentException("npy header too long");
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(10 + head.length + raw.length);
        out.write(MAGIC, 0, MAGIC.length);
        out.write(1);
        out.write(0);
        out.write(head.length & 0xff);
        out.write(head.length >>> 8);
        out.write(head, 0, head.length);
        out.write(raw, 0, raw.length);
        return out.toByteArray();
    }

    /** A decoded {@code .npy}: dtype name, shape and the raw little-endian C-order data. */
    public static final class Decoded {
        public final String dtype;
        public final long[] shape;
        public final byte[] raw;

        Decoded(String dtype, long[] shape, byte[] raw) {
            this.dtype = dtype;
            this.shape = shape;
            this.raw = raw;
        }
    }

    /** A {@code .npy} file's header: dtype, shape and where the data starts, read without decoding the data. */
    public static final class Header {
        public final String dtype;
        public final long[] shape;
        public final int offset;

        Header(String dtype, long[] shape, int offset) {
            this.dtype = dtype;
            this.shape = shape;
            this.offset = offset;
        }
    }

    /**
     * The header of a {@code .npy} file whose header is at most {@code maxHeader} bytes, read from
     * those bytes alone (nothing the header declares is allocated); IllegalArgumentException when
     * it is not one (a negative dimension included).
     */
    public static Header header(byte[] npy, int maxHeader) {
        for (int i = 0; i < MAGIC.length; i++) {
            if (npy.length < 12 || npy[i] != MAGIC[i]) {
                throw new IllegalArgumentException("not a .npy file");
            }
        }
        int major = npy[6];
        long headerLen;
        int start;
        if (major == 1) {
            headerLen = (npy[8] & 0xff) | (npy[9] & 0xff) << 8;
            start = 10;
        } else if (major == 2 || major == 3) {
            headerLen = (npy[8] & 0xffL) | (npy[9] & 0xffL) << 8 | (npy[10] & 0xffL) << 16 | (npy[11] & 0xffL) << 24;
            start = 12;
        } else {
            throw new IllegalArgumentException("unsupported .npy version " + major);
        }
        if (headerLen > maxHeader || start + headerLen > npy.length) {
            throw new IllegalArgumentException(".npy header of " + headerLen + " bytes");
        }
        Decoded d = parseHeader(npy, major, start, (int) headerLen);
        for (long dim : d.shape) {
            if (dim < 0) {
                throw new IllegalArgumentException("bad .npy shape " + shapeRepr(d.shape));
            }
        }
        return new Header(d.dtype, d.shape, start + (int) headerLen);
    }

    /** Parse a {@code .npy} file (versions 1.0–3.0; little-endian or byte-order-free dtypes, C order). */
    public static Decoded decode(byte[] npy) {
        for (int i = 0; i < MAGIC.length; i++) {
            if (npy.length < 10 || npy[i] != MAGIC[i]) {
                throw new IllegalArgumentException("not a .npy file");
            }
        }
        int major = npy[6];
        int headerLen;
        int start;
        if (major == 1) {
            headerLen = (npy[8] & 0xff) | (npy[9] & 0xff) << 8;
            start = 10;
        } else if (major == 2 || major == 3) {
            headerLen = (npy[8] & 0xff) | (npy[9] & 0xff) << 8 | (npy[10] & 0xff) << 16 | (npy[11] & 0xff) << 24;
            start = 12;
        } else {
            throw new IllegalArgumentException("unsupported .npy version " + major);
        }
        Decoded parsed = parseHeader(npy, major, start, headerLen);
        long[] shape = parsed.shape;
        String dtype = parsed.dtype;
        int offset = start + headerLen;
        long size = count(shape) * itemSize(dtype);
        if (npy.length - offset != size) {
            throw new IllegalArgumentException(".npy data has " + (npy.length - offset) + " bytes, expected " + size);
        }
        byte[] raw = new byte[(int) size];
        System.arraycopy(npy, offset, raw, 0, raw.length);
        return new Decoded(dtype, shape, raw);
    }

    /** dtype and shape from the header's dict literal (raw: null). */
    private static Decoded parseHeader(byte[] npy, int major, int start, int headerLen) {
        String header = new String(npy, start, headerLen,
            major == 3 ? StandardCharsets.UTF_8 : StandardCharsets.ISO_8859_1);
        String descr = pyDictValue(header, "descr");
        String fortran = pyDictValue(header, "fortran_order");
        String shapeText = pyDictValue(header, "shape");
        if (!descr.startsWith("'") || !descr.endsWith("'")) {
            throw new IllegalArgumentException("unsupported .npy descr: " + descr);
        }
        String d = descr.substring(1, descr.length() - 1);
        if (d.startsWith("=")) {
            d = (d.endsWith("1") ? "|" : "<") + d.substring(1);
        }
        String dtype = DTYPE.get(d);
        if (dtype == null) {
            throw new IllegalArgumentException("unsupported .npy dtype " + d + " (big-endian or structured?)");
        }
        if (!"False".equals(fortran)) {
            throw new IllegalArgumentException("Fortran-order .npy arrays are not supported");
        }
        String inner = shapeText.trim();
        if (!inner.startsWith("(") || !inner.endsWith(")")) {
            throw new IllegalArgumentException("bad .npy shape " + shapeText);
        }
        List<Long> dims = new ArrayList<>();
        for (String part : inner.substring(1, inner.length() - 1).split(",")) {
            if (!part.trim().isEmpty()) {
                dims.add(Long.parseLong(part.trim()));
            }
        }
        long[] shape = new long[dims.size()];
        for (int i = 0; i < shape.length; i++) {
            shape[i] = dims.get(i);
        }
        return new Decoded(dtype, shape, null);
    }

    /** Python's repr of a shape tuple: (), (3,), (2, 3). */
    public static String shapeRepr(long[] shape) {
        StringBuilder s = new StringBuilder("(");
        for (int i = 0; i < shape.length; i++) {
            if (i > 0) {
                s.append(", ");
            }
            s.append(shape[i]);
        }
        if (shape.length == 1) {
            s.append(',');
        }
        return s.append(')').toString();
    }

    /** The text of one value of the header's Python dict literal (descr, fortran_order, shape). */
    private static String pyDictValue(String header, String key) {
        String marker = "'" + key + "':";
        int i = header.indexOf(marker);
        if (i < 0) {
            throw new IllegalArgumentException(".npy header lacks " + key);
        }
        i += marker.length();
        while (i < header.length() && header.charAt(i) == ' ') {
            i++;
        }
        int end = i;
        if (end < header.length() && header.charAt(end) == '(') {
            end = header.indexOf(')', end) + 1;
        } else if (end < header.length() && header.charAt(end) == '\'') {
            end = header.indexOf('\'', end + 1) + 1;
        } else {
            while (end < header.length() && header.charAt(end) != ',' && header.charAt(end) != '}') {
                end++;
            }
        }
        if (end <= i) {
            throw new IllegalArgumentException("bad .npy header: " + header);
        }
        return header.substring(i, end).trim();
    }
}
