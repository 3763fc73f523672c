package fedgc.train;

import fedgc.compress.Tensor;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * Pure-Java local training of fedgc's {@code logreg} and {@code mlp} (fedgc/models/mlp.py):
 * {@code Flatten → Linear → ReLU → … → Linear}, parameters {@code net.1.weight} (out × in),
 * {@code net.1.bias}, {@code net.3.weight}, … in that order (the layer count and widths are read off
 * the arrays; logreg is the single-layer case), as PyTorch's state_dict names them. Each step:
 * forward, cross-entropy (mean over the batch), backward, then {@code torch.optim.SGD}'s update
 * (weight decay added to the gradient, momentum buffer = gradient at the first step, then
 * {@code m·buf + g}; {@code p ← p − lr·buf}). float32 throughout; matches PyTorch to float rounding
 * (the order of the sums differs from BLAS).
 */
public final class MlpTrainer implements Trainer {
    private final Dataset data;

    public MlpTrainer(Dataset data) {
        this.data = data;
    }

    /** The Linear layers named in {@code model}, checked against each other and the data. */
    static List<String> layerNames(LinkedHashMap<String, Tensor> model, int features) {
        List<String> names = new ArrayList<>();
        int fanIn = features;
        int i = 0;
        for (Map.Entry<String, Tensor> e : model.entrySet()) {
            String expected = "net." + (1 + 2 * (i / 2)) + (i % 2 == 0 ? ".weight" : ".bias");
            if (!e.getKey().equals(expected)) {
                throw new IllegalArgumentException("not an mlp/logreg model: " + e.getKey() + " where " + expected
                    + " was expected");
            }
            long[] s = e.getValue().shape;
            if (i % 2 == 0) {
                if (s.length != 2 || s[1] != fanIn) {
                    throw new IllegalArgumentException(e.getKey() + " must be (out, " + fanIn + ")");
                }
                fanIn = (int) s[0];
                names.add("net." + (1 + 2 * (i / 2)));
            } else if (s.length != 1 || s[0] != fanIn) {
                throw new IllegalArgumentException(e.getKey() + " must be (" + fanIn + ",)");
            }
            i++;
        }
        if (i == 0 || i % 2 != 0) {
            throw new IllegalArgumentException("an mlp/logreg model needs weight and bias per layer");
        }
        return names;
    }

    @Override
    public TrainResult train(LinkedHashMap<String, Tensor> model, TrainConfig config) {
        List<String> layers = layerNames(model, data.features);
        int depth = layers.size();
        float[][] w = new float[depth][], b = new float[depth][];
        float[][] gw = new float[depth][], gb = new float[depth][];
        float[][] bw = new float[depth][], bb = new float[depth][]; // momentum buffers
        int[] width = new int[depth + 1];
        width[0] = data.features;
        for (int l = 0; l < depth; l++) {
            w[l] = model.get(layers.get(l) + ".weight").data.clone();
            b[l] = model.get(layers.get(l) + ".bias").data.clone();
            width[l + 1] = b[l].length;
            gw[l] = new float[w[l].length];
            gb[l] = new float[b[l].length];
        }
        int n = data.n;
        int bs = config.batchSize;
        float lr = (float) config.lr, m = (float) config.momentum, wd = (float) config.weightDecay;
        Random random = new Random(config.seed);
        int pass = 0;
        int[] order = nextOrder(config, pass++, n, random);
        int cursor = 0;
        long samples = 0;
        double lossSum = 0;
        // activations per layer for one batch: a[0] = input, a[l+1] = output of layer l (after ReLU but the last)
        float[][] a = new float[depth + 1][];
        float[][] grad = new float[depth + 1][];
        for (int step = 0; step < config.steps; step++) {
            if (cursor >= n) {
                order = nextOrder(config, pass++, n, random);
                cursor = 0;
            }
            int count = Math.min(bs, n - cursor);
            int[] batch = new int[count];
            System.arraycopy(order, cursor, batch, 0, count);
            cursor += bs;
            // forward
            a[0] = new float[count * width[0]];
            for (int r = 0; r < count; r++) {
                System.arraycopy(data.x, batch[r] * width[0], a[0], r * width[0], width[0]);
            }
            for (int l = 0; l < depth; l++) {
                int in = width[l], out = width[l + 1];
                float[] z = new float[count * out];
                for (int r = 0; r < count; r++) {
                    for (int o = 0; o < out; o++) {
                        float acc = 0f;
                        int wo = o * in, ar = r * in;
                        for (int k = 0; k < in; k++) {
                            acc += a[l][ar + k] * w[l][wo + k];
                        }
                        float v = acc + b[l][o];
                        z[r * out + o] = (l < depth - 1 && !(v > 0f)) ? 0f : v;
                    }
                }
                a[l + 1] = z;
            }
            // cross-entropy (mean) and its gradient w.r.t. the logits
            int classes = width[depth];
            float[] logits = a[depth];
            float[] dz = new float[count * classes];
            double loss = 0;
            for (int r = 0; r < count; r++) {
                int label = data.y[batch[r]];
                if (label >= classes) {
                    throw new IllegalArgumentException("label " + label + " for " + classes + " classes");
                }
                float max = Float.NEGATIVE_INFINITY;
                for (int c = 0; c < classes; c++) {
                    max = Math.max(max, logits[r * classes + c]);
                }
                double sum = 0;
                for (int c = 0; c < classes; c++) {
                    sum += Math.exp(logits[r * classes + c] - max);
                }
                double logSum = Math.log(sum) + max;
                loss += logSum - logits[r * classes + label];
                for (int c = 0; c < classes; c++) {
                    double p = Math.exp(logits[r * classes + c] - logSum);
                    dz[r * classes + c] = (float) ((p - (c == label ? 1 : 0)) / count);
                }
            }
            lossSum += (float) (loss / count);
            // backward
            grad[depth] = dz;
            for (int l = depth - 1; l >= 0; l--) {
                int in = width[l], out = width[l + 1];
                float[] g = grad[l + 1];
                java.util.Arrays.fill(gw[l], 0f);
                java.util.Arrays.fill(gb[l], 0f);
                for (int r = 0; r < count; r++) {
                    for (int o = 0; o < out; o++) {
                        float go = g[r * out + o];
                        if (go == 0f) {
                            continue;
                        }
                        gb[l][o] += go;
                        int wo = o * in, ar = r * in;
                        for (int k = 0; k < in; k++) {
                            gw[l][wo + k] += go * a[l][ar + k];
                        }
                    }
                }
                if (l > 0) {
                    float[] prev = new float[count * in];
                    for (int r = 0; r < count; r++) {
                        for (int o = 0; o < out; o++) {
                            float go = g[r * out + o];
                            if (go == 0f) {
                                continue;
                            }
                            int wo = o * in, pr = r * in;
                            for (int k = 0; k < in; k++) {
                                prev[pr + k] += go * w[l][wo + k];
                            }
                        }
                    }
                    for (int k = 0; k < prev.length; k++) { // ReLU': the activation was positive
                        if (!(a[l][k] > 0f)) {
                            prev[k] = 0f;
                        }
                    }
                    grad[l] = prev;
                }
            }
            // torch.optim.SGD (dampening 0, no Nesterov)
            for (int l = 0; l < depth; l++) {
                bw[l] = sgd(w[l], gw[l], bw[l], lr, m, wd);
                bb[l] = sgd(b[l], gb[l], bb[l], lr, m, wd);
            }
            samples += count;
        }
        LinkedHashMap<String, Tensor> out = new LinkedHashMap<>();
        for (int l = 0; l < depth; l++) {
            out.put(layers.get(l) + ".weight", new Tensor(model.get(layers.get(l) + ".weight").shape, w[l]));
            out.put(layers.get(l) + ".bias", new Tensor(model.get(layers.get(l) + ".bias").shape, b[l]));
        }
        return new TrainResult(out, n, config.steps, samples, lossSum / Math.max(1, config.steps));
    }

    private static float[] sgd(float[] p, float[] g, float[] buf, float lr, float m, float wd) {
        if (wd != 0f) {
            for (int i = 0; i < g.length; i++) {
                g[i] = g[i] + wd * p[i];
            }
        }
        if (m != 0f) {
            if (buf == null) {
                buf = g.clone();
            } else {
                for (int i = 0; i < g.length; i++) {
                    buf[i] = m * buf[i] + g[i];
                }
            }
            g = buf;
        }
        for (int i = 0; i < p.length; i++) {
            p[i] = p[i] - lr * g[i];
        }
        return buf;
    }

    private static int[] nextOrder(TrainConfig config, int pass, int n, Random random) {
        if (config.orders != null && pass < config.orders.length) {
            int[] order = config.orders[pass];
            if (order.length != n) {
                throw new IllegalArgumentException("order " + pass + " has " + order.length + " entries for " + n + " samples");
            }
            return order;
        }
        int[] order = new int[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        for (int i = n - 1; i > 0; i--) { // Fisher–Yates
            int j = random.nextInt(i + 1);
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        return order;
    }
}
