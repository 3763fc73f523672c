package fedgc.compress;

/** No error feedback: what is not sent is dropped (an unapplied update is lost). */
public final class NoMemory implements Memory {
    public float[] compensate(String name, float[] grad) {
        return grad.clone();
    }

    public void update(String name, long[] shape, float[] compensated, float[] sent) {}

    public void restore(String name, float[] sent) {}

    public java.util.LinkedHashMap<String, float[]> state() {
        return new java.util.LinkedHashMap<>();
    }

    public void loadState(java.util.Map<String, float[]> state) {}
}
