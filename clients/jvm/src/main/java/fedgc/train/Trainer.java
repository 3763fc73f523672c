package fedgc.train;

import fedgc.supernode.ArrayRecord;

import fedgc.compress.Tensor;
import java.util.LinkedHashMap;

/**
 * Local training on the device: the global model's arrays in (Flower's ArrayRecord "arrays", in the
 * model's state_dict order), the trained arrays out with the sample count and loss. A pure-Java
 * {@link MlpTrainer} covers fedgc's {@code logreg} and {@code mlp}; an Android app plugs in an
 * on-device runtime (ONNX Runtime training, ExecuTorch, TensorFlow Lite) by implementing this: load
 * the arrays into the runtime's parameters, run {@code config.steps} SGD steps on the local data,
 * read them back under the same names and shapes. The round's update is then
 * {@link #delta}(global, trained), which fedgc compresses ({@code fedgc.compress}).
 */
public interface Trainer {
    TrainResult train(LinkedHashMap<String, Tensor> model, TrainConfig config) throws Exception;

    /** What fedgc sends: Δ = w_global − w_local per parameter (float32), in the model's order. */
    static LinkedHashMap<String, Tensor> delta(LinkedHashMap<String, Tensor> global, LinkedHashMap<String, Tensor> local) {
        LinkedHashMap<String, Tensor> out = new LinkedHashMap<>();
        for (java.util.Map.Entry<String, Tensor> e : global.entrySet()) {
            Tensor trained = local.get(e.getKey());
            if (trained == null || trained.numel() != e.getValue().numel()) {
                throw new IllegalArgumentException("trained model lacks " + e.getKey() + " or changed its shape");
            }
            float[] d = new float[trained.numel()];
            for (int i = 0; i < d.length; i++) {
                d[i] = e.getValue().data[i] - trained.data[i];
            }
            out.put(e.getKey(), new Tensor(e.getValue().shape, d));
        }
        return out;
    }
}
