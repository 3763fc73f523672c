package fedgc.compress;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * DGC's client memory (fedgc's {@code fedgc/compress/dgc_memory.py}; Lin et al. 2018, §3.2–3.3): per
 * parameter a momentum u and an accumulated velocity v, in fp32.
 *
 * <pre>
 *   u ← m·u + g;      v ← v + u        (momentum correction)
 *   u ← m·(u + g);    v ← v + u + g    (Nesterov)
 *   v ← v + g                          (momentum correction off)
 * </pre>
 *
 * After sending, v keeps what was not sent (exactly zero where an fp32 value was sent; the rounding
 * error with fp16 values or wire format v3's int8, int4 and sign codes); momentum factor masking zeroes
 * u where something nonzero was sent (an int8/int4 code 0 is sent as 0: not masked), except for
 * tensors sent dense ({@code dim ≤ 1} with dense small tensors), which get plain momentum SGD.
 *
 * <p>{@code momentumBf16} is fedgc's {@code momentum_dtype: bf16}: u is kept between rounds in
 * bfloat16 (rounded to nearest even when a round reads it, as fedgc's client rounds it into its
 * context state after every round); v stays fp32, nothing sent or owed is lost.
 */
public final class DgcMemory implements Memory {
    public final float momentum;
    public final boolean nesterov, momentumCorrection, momentumMasking, denseSmallTensors;
    public boolean momentumBf16 = false;
    public final Map<String, float[]> momentums = new LinkedHashMap<>();
    public final Map<String, float[]> velocities = new LinkedHashMap<>();

    public DgcMemory(double momentum, boolean nesterov, boolean momentumCorrection, boolean momentumMasking,
                     boolean denseSmallTensors) {
        this.momentum = (float) momentum; // PyTorch multiplies a float32 tensor by the scalar in float32
        this.nesterov = nesterov;
        this.momentumCorrection = momentumCorrection;
        this.momentumMasking = momentumMasking;
        this.denseSmallTensors = denseSmallTensors;
    }

    /** fedgc's defaults: m = 0.9, no Nesterov, momentum correction and masking on, small tensors dense. */
    public DgcMemory() {
        this(0.9, false, true, true, true);
    }

    public float[] compensate(String name, float[] grad) {
        int n = grad.length;
        float[] v = velocities.get(name);
        float[] velocity = new float[n];
        if (!momentumCorrection) {
            for (int i = 0; i < n; i++) {
                velocity[i] = (v == null ? 0f : v[i]) + grad[i];
            }
        } else {
            float[] u = momentums.get(name);
            float[] next = new float[n];
            float m = momentum;
            for (int i = 0; i < n; i++) {
                float ui = u == null ? 0f : (momentumBf16 ? bf16(u[i]) : u[i]);
                float vi = v == null ? 0f : v[i];
                if (nesterov) {
                    next[i] = m * (ui + grad[i]);
                    velocity[i] = vi + next[i] + grad[i];
                } else {
                    next[i] = m * ui + grad[i];
                    velocity[i] = vi + next[i];
                }
            }
            momentums.put(name, next);
        }
        velocities.put(name, velocity);
        return velocity.clone();
    }

    public void update(String name, long[] shape, float[] compensated, float[] sent) {
        velocities.put(name, Ops.sub(compensated, sent));
        boolean sentDense = denseSmallTensors && shape.length <= 1;
        if (momentumCorrection && momentumMasking && !sentDense) {
            float[] u = momentums.get(name).clone();
            for (int i = 0; i < u.length; i++) {
                if (sent[i] != 0f) { // -0.0 counts as not sent, NaN as sent (as torch's sent != 0)
                    u[i] = 0f;
                }
            }
            momentums.put(name, u);
        }
    }

    /** {@code v} rounded to bfloat16 (nearest, ties to even), as PyTorch's {@code .to(torch.bfloat16)}. */
    public static float bf16(float v) {
        if (Float.isNaN(v)) {
            return v;
        }
        int bits = Float.floatToRawIntBits(v);
        bits += 0x7fff + ((bits >>> 16) & 1);
        return Float.intBitsToFloat(bits & 0xffff0000);
    }

    /** The momentum of {@code name} as stored between rounds (bfloat16-rounded with {@code momentumBf16}). */
    public float[] storedMomentum(String name) {
        float[] u = momentums.get(name);
        if (u == null || !momentumBf16) {
            return u;
        }
        float[] out = new float[u.length];
        for (int i = 0; i < u.length; i++) {
            out[i] = bf16(u[i]);
        }
        return out;
    }

    public static final String MOMENTUM_KEY = "dgc_momentum/", VELOCITY_KEY = "dgc_velocity/";

    public LinkedHashMap<String, float[]> state() {
        LinkedHashMap<String, float[]> out = new LinkedHashMap<>();
        for (String name : momentums.keySet()) {
            out.put(MOMENTUM_KEY + name, storedMomentum(name).clone());
        }
        for (Map.Entry<String, float[]> e : velocities.entrySet()) {
            out.put(VELOCITY_KEY + e.getKey(), e.getValue().clone());
        }
        return out;
    }

    public void loadState(Map<String, float[]> state) {
        momentums.clear();
        velocities.clear();
        for (Map.Entry<String, float[]> e : state.entrySet()) {
            if (e.getKey().startsWith(MOMENTUM_KEY)) {
                momentums.put(e.getKey().substring(MOMENTUM_KEY.length()), e.getValue().clone());
            } else if (e.getKey().startsWith(VELOCITY_KEY)) {
                velocities.put(e.getKey().substring(VELOCITY_KEY.length()), e.getValue().clone());
            }
        }
    }

    public void restore(String name, float[] sent) {
        float[] v = velocities.get(name);
        velocities.put(name, v == null ? sent.clone() : Ops.add(v, sent));
    }
}
