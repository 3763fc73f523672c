package fedgc.supernode;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/** The flwr version whose protobuf schema this client was built from (clients/jvm/proto/FLWR_VERSION). */
final class Version {
    private Version() {}

    static String flwr() {
        try (InputStream in = Version.class.getResourceAsStream("FLWR_VERSION")) {
            if (in == null) {
                throw new IllegalStateException("FLWR_VERSION missing from the jar (build with make jvm)");
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[256];
            int n;
            while ((n = in.read(buf)) > 0) {
                out.write(buf, 0, n);
            }
            return new String(out.toByteArray(), StandardCharsets.US_ASCII).trim();
        } catch (IOException e) {
            throw new IllegalStateException("cannot read FLWR_VERSION: " + e.getMessage(), e);
        }
    }
}
