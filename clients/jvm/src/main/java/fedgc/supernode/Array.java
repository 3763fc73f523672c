package fedgc.supernode;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Flower's {@code Array}: dtype, shape, stype and serialized data. Arrays made here use Flower's
 * numpy serialization ({@code stype = "numpy.ndarray"}, data = a {@code .npy} file), so a Python
 * ServerApp reads them with {@code array.numpy()}.
 */
public final class Array {
    /** Flower's {@code SType.NUMPY}. */
    public static final String STYPE_NUMPY = "numpy.ndarray";

    public final String dtype;
    public final long[] shape;
    public final String stype;
    public final byte[] data;

    public Array(String dtype, long[] shape, String stype, byte[] data) {
        this.dtype = dtype;
        this.shape = shape.clone();
        this.stype = stype;
        this.data = data;
    }

    /** A numpy array from raw little-endian C-order data. */
    public static Array fromRaw(String dtype, long[] shape, byte[] raw) {
        return new Array(dtype, shape, STYPE_NUMPY, Npy.encode(dtype, shape, raw));
    }

    public static Array ofFloat32(float[] values, long... shape) {
        ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        return fromRaw("float32", shapeOr(shape, values.length), b.array());
    }

    public static Array ofFloat64(double[] values, long... shape) {
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asDoubleBuffer().put(values);
        return fromRaw("float64", shapeOr(shape, values.length), b.array());
    }

    public static Array ofInt32(int[] values, long... shape) {
        ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(values);
        return fromRaw("int32", shapeOr(shape, values.length), b.array());
    }

    public static Array ofInt64(long[] values, long... shape) {
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asLongBuffer().put(values);
        return fromRaw("int64", shapeOr(shape, values.length), b.array());
    }

    private static long[] shapeOr(long[] shape, int n) {
        return shape.length == 0 ? new long[] {n} : shape;
    }

    /** The decoded {@code .npy} (only for {@code stype = "numpy.ndarray"}). */
    public Npy.Decoded npy() {
        if (!STYPE_NUMPY.equals(stype)) {
            throw new IllegalStateException("unsupported serialization type for numpy conversion: '" + stype + "'");
        }
        return Npy.decode(data);
    }

    private ByteBuffer rawOf(String expected) {
        Npy.Decoded d = npy();
        if (!d.dtype.equals(expected)) {
            throw new IllegalStateException("array is " + d.dtype + ", not " + expected);
        }
        return ByteBuffer.wrap(d.raw).order(ByteOrder.LITTLE_ENDIAN);
    }

    public float[] toFloat32() {
        ByteBuffer b = rawOf("float32");
        float[] out = new float[b.remaining() / 4];
        b.asFloatBuffer().get(out);
        return out;
    }

    public double[] toFloat64() {
        ByteBuffer b = rawOf("float64");
        double[] out = new double[b.remaining() / 8];
        b.asDoubleBuffer().get(out);
        return out;
    }

    public int[] toInt32() {
        ByteBuffer b = rawOf("int32");
        int[] out = new int[b.remaining() / 4];
        b.asIntBuffer().get(out);
        return out;
    }

    public long[] toInt64() {
        ByteBuffer b = rawOf("int64");
        long[] out = new long[b.remaining() / 8];
        b.asLongBuffer().get(out);
        return out;
    }

    @Override
    public String toString() {
        return "Array(dtype=" + dtype + ", shape=" + Arrays.toString(shape) + ", stype=" + stype
            + ", " + data.length + " bytes)";
    }
}
