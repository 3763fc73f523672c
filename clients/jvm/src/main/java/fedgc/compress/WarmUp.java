package fedgc.compress;

/** DGC's warm-up schedule (fedgc/compress/warmup.py); the server applies it and sends the round's density. */
public final class WarmUp {
    public static final double[] DENSITIES = {0.25, 0.0625, 0.015625, 0.004, 0.001};

    private WarmUp() {}

    /** Density in {@code round} (1-based); never sparser than {@code target}. */
    public static double density(long round, int warmupRounds, double target) {
        if (round < 1) {
            throw new IllegalArgumentException("rounds are 1-based, got " + round);
        }
        if (warmupRounds <= 0 || round > warmupRounds) {
            return target;
        }
        int stage = (int) ((round - 1) * DENSITIES.length / warmupRounds);
        return Math.max(DENSITIES[stage], target);
    }
}
