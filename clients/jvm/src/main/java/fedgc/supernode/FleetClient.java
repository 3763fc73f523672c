package fedgc.supernode;

import com.google.protobuf.MessageLite;
import com.google.protobuf.Parser;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.Signature;
import java.text.SimpleDateFormat;
import java.util.Date;
import java.util.Locale;
import java.util.TimeZone;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLSocketFactory;

/**
 * Flower 1.41–1.42's Fleet API: protobuf over HTTP ({@code POST /v1/fleet/<method>}, body and answer
 * {@code application/protobuf}), each request signed as Flower's {@code NodeAuthHttpInterceptor} does:
 * {@code flwr-public-key} (base64 of the node's PEM public key), {@code flwr-timestamp} (ISO 8601, UTC)
 * and {@code flwr-signature} (base64 of the DER ECDSA-SHA256 signature of the timestamp), plus the
 * runtime-version headers of {@code RuntimeVersionHttpInterceptor}.
 */
public final class FleetClient {
    public static final String PROTOBUF_MEDIA_TYPE = "application/protobuf";
    /**
     * The largest answer a call reads by default: 64 MiB, or Flower's largest array chunk
     * ({@code FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE}, 5 MiB by default) and 1 MiB more if that is larger. A
     * PullObject answer holds one object (an array chunk, or a record's body), and every other answer
     * is small, so a larger one is not Flower's: it is refused ({@link FleetException}, the call's
     * HTTP status and the sizes in its message, logged by the SuperNode) without reading it into
     * memory: a declared {@code Content-Length} above it is refused unread, and an answer without one
     * is read no further than the maximum.
     */
    public static final int DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
    /** The most of an HTTP error's body read for its message; a longer body is cut there. */
    static final int MAX_ERROR_BODY_BYTES = 64 * 1024;

    private final String baseUrl;
    private final KeyPair keys;
    private final String publicKeyHeader;
    private final SSLSocketFactory sslSocketFactory;
    private final String flwrVersion;
    private final int timeoutMs;
    private final int maxResponseBytes;

    /**
     * @param address HOST:PORT of the SuperLink
     * @param tls false: plain HTTP ({@code --insecure}); true: HTTPS
     * @param sslSocketFactory with TLS: trust these roots (see {@link Tls}); null: the platform's trust store
     */
    public FleetClient(String address, KeyPair keys, boolean tls, SSLSocketFactory sslSocketFactory, int timeoutMs) {
        this(address, keys, tls, sslSocketFactory, timeoutMs, defaultMaxResponseBytes());
    }

    /** @param maxResponseBytes the largest answer a call reads (see {@link #DEFAULT_MAX_RESPONSE_BYTES}) */
    public FleetClient(String address, KeyPair keys, boolean tls, SSLSocketFactory sslSocketFactory, int timeoutMs,
                       int maxResponseBytes) {
        if (maxResponseBytes <= 0) {
            throw new IllegalArgumentException("maxResponseBytes must be positive, got " + maxResponseBytes);
        }
        this.baseUrl = (tls ? "https://" : "http://") + address;
        this.keys = keys;
        this.publicKeyHeader = B64.encode(Keys.publicKeyPem(keys.getPublic()));
        this.sslSocketFactory = sslSocketFactory;
        this.flwrVersion = Version.flwr();
        this.timeoutMs = timeoutMs;
        this.maxResponseBytes = maxResponseBytes;
    }

    /** {@link #DEFAULT_MAX_RESPONSE_BYTES}, raised to hold the largest array chunk Flower is set to send. */
    static int defaultMaxResponseBytes() {
        return (int) Math.min(Integer.MAX_VALUE - 8L,
            Math.max(DEFAULT_MAX_RESPONSE_BYTES, (long) Inflatable.maxChunkSize + (1 << 20)));
    }

    /** The largest answer this client reads. */
    public int maxResponseBytes() {
        return maxResponseBytes;
    }

    /**
     * One Fleet call, no retry: the parsed answer, {@link FleetException} for an HTTP error, IOException
     * when unreachable. Connections are kept alive and reused (HTTP/1.1 keep-alive, and with TLS one
     * handshake per connection, not per call): every answer, error bodies included, is read to its end
     * and closed, and the connection is never {@code disconnect()}ed on success, so the platform's pool
     * (the JDK's keep-alive cache; OkHttp's pool on Android) hands it to the next call. A connection that
     * failed is dropped.
     */
    public <T> T call(String method, MessageLite request, Parser<T> parser, int callTimeoutMs)
            throws IOException, FleetException {
        byte[] body = request.toByteArray();
        HttpURLConnection c = (HttpURLConnection) new URL(baseUrl + "/v1/fleet/" + method).openConnection();
        boolean ok = false;
        try {
            if (c instanceof HttpsURLConnection && sslSocketFactory != null) {
                ((HttpsURLConnection) c).setSSLSocketFactory(sslSocketFactory);
            }
            c.setRequestMethod("POST");
            c.setDoOutput(true);
            c.setConnectTimeout(callTimeoutMs > 0 ? callTimeoutMs : timeoutMs);
            c.setReadTimeout(callTimeoutMs > 0 ? callTimeoutMs : timeoutMs);
            c.setFixedLengthStreamingMode(body.length);
            c.setRequestProperty("content-type", PROTOBUF_MEDIA_TYPE);
            c.setRequestProperty("accept", PROTOBUF_MEDIA_TYPE);
            c.setRequestProperty("flwr-package-name", "flwr");
            c.setRequestProperty("flwr-package-version", flwrVersion);
            c.setRequestProperty("flwr-component-name", "SuperNode");
            String timestamp = isoNow();
            c.setRequestProperty("flwr-public-key", publicKeyHeader);
            c.setRequestProperty("flwr-timestamp", timestamp);
            c.setRequestProperty("flwr-signature", sign(timestamp));
            try (OutputStream out = c.getOutputStream()) {
                out.write(body);
            }
            int status = c.getResponseCode();
            if (status / 100 != 2) {
                InputStream err = c.getErrorStream();
                String text = "";
                boolean whole = true;
                if (err != null) {
                    try {
                        byte[] read = readAtMost(err, MAX_ERROR_BODY_BYTES);
                        whole = read != null;
                        if (read == null) {
                            c.disconnect();  // the rest stays unread: this connection is not reused
                        }
                        text = read != null ? new String(read, StandardCharsets.UTF_8) : "(an error body over "
                            + MAX_ERROR_BODY_BYTES + " bytes, not read)";
                    } finally {
                        err.close();
                    }
                }
                ok = whole;  // an error body read to its end: the connection can be reused
                throw new FleetException(method, status, text);
            }
            long declared = contentLength(c);
            if (declared > maxResponseBytes) {
                c.disconnect();
                throw FleetException.refused(method, status, "the answer declares " + declared
                    + " bytes, over the maximum of " + maxResponseBytes + "; refused unread");
            }
            T answer;
            InputStream in = c.getInputStream();
            try {
                byte[] data = readAtMost(in, maxResponseBytes);
                if (data == null) {
                    c.disconnect();  // closes the socket: the rest of the answer is never read
                    throw FleetException.refused(method, status, "the answer is over the maximum of "
                        + maxResponseBytes + " bytes; refused, read no further");
                }
                answer = parser.parseFrom(data);
            } finally {
                in.close();
            }
            ok = true;
            return answer;
        } finally {
            if (!ok) {
                c.disconnect();  // a broken or half-read connection must not go back to the pool
            }
        }
    }

    private String sign(String timestamp) {
        try {
            Signature s = Signature.getInstance("SHA256withECDSA");
            s.initSign(keys.getPrivate());
            s.update(timestamp.getBytes(StandardCharsets.US_ASCII));
            return B64.encode(s.sign());
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("cannot sign with the node key: " + e.getMessage(), e);
        }
    }

    /** Python's {@code datetime.now(timezone.utc).isoformat()} (to the millisecond). */
    static String isoNow() {
        SimpleDateFormat f = new SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS'000+00:00'", Locale.ROOT);
        f.setTimeZone(TimeZone.getTimeZone("UTC"));
        return f.format(new Date());
    }

    /** The {@code Content-Length} the answer declares, -1 when none (or not a number). */
    private static long contentLength(HttpURLConnection c) {
        String value = c.getHeaderField("content-length");  // getContentLengthLong needs Android API 24
        if (value == null) {
            return -1;
        }
        try {
            return Long.parseLong(value.trim());
        } catch (NumberFormatException e) {
            return Long.MAX_VALUE;  // a length that is no number is no answer of Flower's: refused unread
        }
    }

    /** {@code in} read to its end, or null as soon as it holds more than {@code limit} bytes (the rest unread). */
    static byte[] readAtMost(InputStream in, int limit) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream(Math.min(limit, 65536));
        byte[] buf = new byte[65536];
        long total = 0;
        while (true) {
            int n = in.read(buf, 0, (int) Math.min(buf.length, limit - total + 1));
            if (n < 0) {
                return out.toByteArray();
            }
            total += n;
            if (total > limit) {
                return null;
            }
            out.write(buf, 0, n);
        }
    }
}
