package fedgc.compress;

/** Element-wise float32 arithmetic, one IEEE rounding per operation (as PyTorch's CPU kernels). */
final class Ops {
    private Ops() {}

    static float[] add(float[] a, float[] b) {
        float[] out = new float[a.length];
        for (int i = 0; i < a.length; i++) {
            out[i] = a[i] + b[i];
        }
        return out;
    }

    static float[] sub(float[] a, float[] b) {
        float[] out = new float[a.length];
        for (int i = 0; i < a.length; i++) {
            out[i] = a[i] - b[i];
        }
        return out;
    }
}
