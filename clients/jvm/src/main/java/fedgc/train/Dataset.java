package fedgc.train;

import fedgc.supernode.Npy;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

/**
 * Device-local data: {@code n} samples of {@code features} float32 values (any input shape,
 * flattened) and their integer labels. {@link #loadNpz} reads an {@code .npz} with arrays {@code x}
 * (float32/float64/uint8, shape (n, ...)) and {@code y} (any integer type, shape (n,)), as
 * {@code np.savez(path, x=x, y=y)} (or {@code savez_compressed}) writes it.
 */
public final class Dataset {
    public final int n, features;
    public final long[] inputShape;
    public final float[] x;
    public final int[] y;

    public Dataset(long[] inputShape, float[] x, int[] y) {
        long f = 1;
        for (long d : inputShape) {
            f *= d;
        }
        if ((long) y.length * f != x.length) {
            throw new IllegalArgumentException(x.length + " feature values for " + y.length + " samples of " + f);
        }
        this.inputShape = inputShape.clone();
        this.features = (int) f;
        this.n = y.length;
        this.x = x;
        this.y = y;
    }

    public static Dataset loadNpz(File file) throws IOException {
        InputStream in = new FileInputStream(file);
        try {
            return fromNpz(in);
        } finally {
            in.close();
        }
    }

    public static Dataset fromNpz(InputStream stream) throws IOException {
        Map<String, Npy.Decoded> arrays = readNpz(stream);
        Npy.Decoded x = arrays.get("x"), y = arrays.get("y");
        if (x == null || y == null) {
            throw new IOException("the .npz needs arrays x and y, has " + arrays.keySet());
        }
        if (y.shape.length != 1 || x.shape.length < 1 || x.shape[0] != y.shape[0]) {
            throw new IOException("x must be (n, ...) and y (n,): got x " + Npy.shapeRepr(x.shape) + ", y "
                + Npy.shapeRepr(y.shape));
        }
        long[] inputShape = new long[x.shape.length - 1];
        System.arraycopy(x.shape, 1, inputShape, 0, inputShape.length);
        return new Dataset(inputShape, toFloat32(x), toInt(y));
    }

    /** Every array of an {@code .npz}, by name (without ".npy"), in the archive's order. */
    public static LinkedHashMap<String, Npy.Decoded> readNpz(InputStream stream) throws IOException {
        LinkedHashMap<String, Npy.Decoded> out = new LinkedHashMap<>();
        ZipInputStream zip = new ZipInputStream(stream);
        byte[] buffer = new byte[1 << 16];
        for (ZipEntry entry = zip.getNextEntry(); entry != null; entry = zip.getNextEntry()) {
            String name = entry.getName();
            if (!name.endsWith(".npy")) {
                continue;
            }
            ByteArrayOutputStream bytes = new ByteArrayOutputStream(entry.getSize() > 0 ? (int) entry.getSize() : 1 << 16);
            for (int r = zip.read(buffer); r >= 0; r = zip.read(buffer)) {
                bytes.write(buffer, 0, r);
            }
            try {
                out.put(name.substring(0, name.length() - 4), Npy.decode(bytes.toByteArray()));
            } catch (IllegalArgumentException err) {
                throw new IOException(name + ": " + err.getMessage());
            }
        }
        return out;
    }

    static float[] toFloat32(Npy.Decoded a) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(a.raw).order(ByteOrder.LITTLE_ENDIAN);
        int count = a.raw.length / Npy.itemSize(a.dtype);
        float[] out = new float[count];
        switch (a.dtype) {
            case "float32": b.asFloatBuffer().get(out); break;
            case "float64": for (int i = 0; i < count; i++) { out[i] = (float) b.getDouble(); } break;
            case "uint8": for (int i = 0; i < count; i++) { out[i] = a.raw[i] & 0xff; } break;
            default: throw new IOException("x must be float32, float64 or uint8, not " + a.dtype);
        }
        return out;
    }

    static int[] toInt(Npy.Decoded a) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(a.raw).order(ByteOrder.LITTLE_ENDIAN);
        int count = a.raw.length / Npy.itemSize(a.dtype);
        int[] out = new int[count];
        for (int i = 0; i < count; i++) {
            long v;
            switch (a.dtype) {
                case "int64": case "uint64": v = b.getLong(); break;
                case "int32": v = b.getInt(); break;
                case "uint32": v = b.getInt() & 0xffffffffL; break;
                case "int16": v = b.getShort(); break;
                case "uint16": v = b.getShort() & 0xffff; break;
                case "int8": v = b.get(); break;
                case "uint8": v = b.get() & 0xff; break;
                default: throw new IOException("y must be an integer array, not " + a.dtype);
            }
            if (v < 0 || v > Integer.MAX_VALUE) {
                throw new IOException("label " + v + " out of range");
            }
            out[i] = (int) v;
        }
        return out;
    }
}
