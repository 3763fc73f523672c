package fedgc.train;

/**
 * Local SGD as fedgc's {@code train_local} (fedgc/execution/training.py) runs it: {@code steps} minibatches of
 * {@code batchSize} drawn by walking a random permutation of the local data and drawing a new one
 * when it is used up (the last batch of a pass may be short); {@code torch.optim.SGD} with
 * {@code momentum} and {@code weightDecay}; cross-entropy loss (mean over the batch).
 */
public final class TrainConfig {
    public int steps = 1;
    public int batchSize = 32;
    public double lr = 0.05;
    public double momentum = 0.0;
    public double weightDecay = 0.0;
    /** Seed of the Java shuffles (PyTorch's randperm stream is not reproduced). */
    public long seed = 0;
    /**
     * Optional sample orders, one permutation of the local data per pass, used before any random one
     * (a test hands Java the permutations PyTorch drew, to compare the two trainers step by step).
     */
    public int[][] orders;

    /** fedgc's {@code steps_for_epochs}: {@code max(1, ceil(epochs · n / batchSize))}. */
    public static int stepsForEpochs(int numSamples, int batchSize, double epochs) {
        return Math.max(1, (int) Math.ceil(epochs * numSamples / batchSize));
    }
}
