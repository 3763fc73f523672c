package fedgc.train;

import fedgc.compress.Tensor;
import java.util.LinkedHashMap;

/** A local training run: the trained arrays, and what fedgc's reply metrics report. */
public final class TrainResult {
    public final LinkedHashMap<String, Tensor> model;
    /** Local examples ({@code num-examples}). */
    public final int numExamples;
    public final int steps;
    /** Samples processed ({@code samples}). */
    public final long samples;
    /** Mean of the steps' losses ({@code train-loss}). */
    public final double meanLoss;

    public TrainResult(LinkedHashMap<String, Tensor> model, int numExamples, int steps, long samples, double meanLoss) {
        this.model = model;
        this.numExamples = numExamples;
        this.steps = steps;
        this.samples = samples;
        this.meanLoss = meanLoss;
    }
}
