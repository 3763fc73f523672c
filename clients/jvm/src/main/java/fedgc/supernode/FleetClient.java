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

    private final String baseUrl;
    private final KeyPair keys;
    private final String publicKeyHeader;
    private final SSLSocketFactory sslSocketFactory;
    private final String flwrVersion;
    private final int timeoutMs;

    /**
     * @param address HOST:PORT of the SuperLink
     * @param tls false: plain HTTP ({@code --insecure}); true: HTTPS
     * @param sslSocketFactory with TLS: trust these roots (see {@link Tls}); null: the platform's trust store
     */
    public FleetClient(String address, KeyPair keys, boolean tls, SSLSocketFactory sslSocketFactory, int timeoutMs) {
        this.baseUrl = (tls ? "https://" : "http://") + address;
        this.keys = keys;
        this.publicKeyHeader = B64.encode(Keys.publicKeyPem(keys.getPublic()));
        this.sslSocketFactory = sslSocketFactory;
        this.flwrVersion = Version.flwr();
        this.timeoutMs = timeoutMs;
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
                if (err != null) {
                    try {
                        text = new String(readAll(err), StandardCharsets.UTF_8);
                    } finally {
                        err.close();
                    }
                }
                ok = true;  // the error body was read to its end: the connection can be reused
                throw new FleetException(method, status, text);
            }
            T answer;
            try (InputStream in = c.getInputStream()) {
                answer = parser.parseFrom(readAll(in));
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

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[65536];
        int n;
        while ((n = in.read(buf)) > 0) {
            out.write(buf, 0, n);
        }
        return out.toByteArray();
    }
}
