package fedgc.compress;

import java.util.LinkedHashMap;
import java.util.Map;

/** Plain error feedback: e ← (e + g) − sent (fedgc's {@code ResidualMemory}). */
public final class ResidualMemory implements Memory {
    public final Map<String, float[]> residuals = new LinkedHashMap<>();

    public float[] compensate(String name, float[] grad) {
        float[] residual = residuals.get(name);
        float[] out = grad.clone();
        if (residual != null) {
            for (int i = 0; i < out.length; i++) {
                out[i] = grad[i] + residual[i];
            }
        }
        return out;
    }

    public void update(String name, long[] shape, float[] compensated, float[] sent) {
        residuals.put(name, Ops.sub(compensated, sent));
    }

    public LinkedHashMap<String, float[]> state() {
        LinkedHashMap<String, float[]> out = new LinkedHashMap<>();
        for (Map.Entry<String, float[]> e : residuals.entrySet()) {
            out.put("residual/" + e.getKey(), e.getValue().clone());
        }
        return out;
    }

    public void loadState(Map<String, float[]> state) {
        residuals.clear();
        for (Map.Entry<String, float[]> e : state.entrySet()) {
            if (e.getKey().startsWith("residual/")) {
                residuals.put(e.getKey().substring("residual/".length()), e.getValue().clone());
            }
        }
    }

    public void restore(String name, float[] sent) {
        float[] residual = residuals.get(name);
        residuals.put(name, residual == null ? sent.clone() : Ops.add(residual, sent));
    }
}
