package fedgc.compress;

/**
 * Error-feedback memory, per parameter name (fedgc's {@code fedgc/compress/memory.py}):
 * {@link #compensate} before compression, {@link #update} after it, {@link #restore} for an update
 * that was sent but never applied by the server.
 */
public interface Memory {
    /** The values to compress: {@code grad} plus what the memory carries for {@code name} (a new array). */
    float[] compensate(String name, float[] grad);

    /** {@code sent} (dense, fp32) was transmitted out of {@code compensated}. */
    void update(String name, long[] shape, float[] compensated, float[] sent);

    /** An update that never reached the server goes back into the memory. */
    void restore(String name, float[] sent);

    /** Everything the memory keeps, flat, under fedgc's state keys ({@code residual/NAME}, {@code dgc_velocity/NAME}, ...). */
    java.util.LinkedHashMap<String, float[]> state();

    /** Replace the memory's contents by a {@link #state}. */
    void loadState(java.util.Map<String, float[]> state);
}
