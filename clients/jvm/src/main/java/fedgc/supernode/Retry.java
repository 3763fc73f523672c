package fedgc.supernode;

import java.io.IOException;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Flower's HTTP retry ({@code make_simple_http_retry_invoker}): retry while the SuperLink is
 * unreachable (connect/read/write failures and timeouts) or answers 502/503/504, waiting an
 * exponential back-off (1 s, ×2, at most 20 s) with full jitter; any other HTTP error is final.
 */
final class Retry {
    interface Call<T> {
        T run() throws IOException, FleetException;
    }

    /** Thrown when the node is asked to stop while waiting to retry. */
    static final class Stopped extends Exception {
        private static final long serialVersionUID = 1L;

        Stopped() {
            super("stopped");
        }
    }

    private static final Random RANDOM = new Random();
    private final CountDownLatch stop;
    private final long maxWaitMs;

    /** @param maxWaitMs give up after this long (≤ 0: never), as {@code --max-wait-time} */
    Retry(CountDownLatch stop, long maxWaitMs) {
        this.stop = stop;
        this.maxWaitMs = maxWaitMs;
    }

    static boolean transientStatus(int status) {
        return status == 502 || status == 503 || status == 504;
    }

    <T> T invoke(String what, Call<T> call) throws IOException, FleetException, Stopped {
        long started = System.currentTimeMillis();
        double delay = 1.0;
        int tries = 0;
        while (true) {
            if (stop.getCount() == 0) {
                throw new Stopped();
            }
            tries++;
            try {
                T result = call.run();
                if (tries > 1) {
                    Log.info(String.format("Connection successful after %.2f seconds and %d tries.",
                        (System.currentTimeMillis() - started) / 1000.0, tries));
                }
                return result;
            } catch (FleetException e) {
                if (!transientStatus(e.status)) {
                    throw e;
                }
                Log.debug(what + ": " + e.getMessage());
                if (giveUp(started)) {
                    throw e;
                }
            } catch (IOException e) {
                if (e instanceof javax.net.ssl.SSLException) {
                    throw e; // a TLS problem does not heal by waiting
                }
                Log.debug(what + ": " + e);
                if (giveUp(started)) {
                    throw e;
                }
            }
            double wait = RANDOM.nextDouble() * delay;
            Log.warn(String.format("Connection attempt failed, retrying in %.2f seconds", wait));
            try {
                if (stop.await((long) (wait * 1000), TimeUnit.MILLISECONDS)) {
                    throw new Stopped();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new Stopped();
            }
            delay = Math.min(delay * 2, 20.0);
        }
    }

    private boolean giveUp(long started) {
        boolean over = maxWaitMs > 0 && System.currentTimeMillis() - started >= maxWaitMs;
        if (over) {
            Log.warn(String.format("Giving up reconnection after %.2f seconds.",
                (System.currentTimeMillis() - started) / 1000.0));
        }
        return over;
    }
}
