package fedgc.compress;

import fedgc.supernode.Array;

import java.util.Arrays;

/** A float32 tensor: its shape and its values, flat in C (row-major) order. */
public final class Tensor {
    public final long[] shape;
    public final float[] data;

    public Tensor(long[] shape, float[] data) {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        if (n != data.length) {
            throw new IllegalArgumentException(data.length + " values for shape " + Arrays.toString(shape));
        }
        this.shape = shape.clone();
        this.data = data;
    }

    public int numel() {
        return data.length;
    }

    public int dim() {
        return shape.length;
    }

    public Tensor copy() {
        return new Tensor(shape, data.clone());
    }

    /** A Flower float32 array (an {@code .npy}), as {@code Array(ndarray)} makes it. */
    public Array toArray() {
        return Array.ofFloat32(data, shape);
    }

    /** A Flower float32 array's values ({@code IllegalStateException} for another dtype). */
    public static Tensor fromArray(Array array) {
        return new Tensor(array.npy().shape, array.toFloat32());
    }
}
