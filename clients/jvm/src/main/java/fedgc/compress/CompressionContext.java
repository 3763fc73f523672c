package fedgc.compress;

/** What a compressor may know about the round besides the tensor (fedgc's {@code CompressionContext}). */
public final class CompressionContext {
    /** The server round (1-based). */
    public final long round;
    /** The round's density, as the server sends it (already warmed up: see {@link WarmUp}). */
    public final double density;
    /** Clients aggregated this round: DGC's N of the N^-1/2 clipping threshold. */
    public final int numClients;

    public CompressionContext(long round, double density, int numClients) {
        this.round = round;
        this.density = density;
        this.numClients = numClients;
    }
}
