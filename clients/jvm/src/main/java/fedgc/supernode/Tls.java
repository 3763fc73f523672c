package fedgc.supernode;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.File;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/** TLS that trusts the root certificate(s) of a PEM file, as {@code flower-supernode --root-certificates}. */
public final class Tls {
    private Tls() {}

    public static SSLSocketFactory trusting(String pemPath) throws IOException, GeneralSecurityException {
        byte[] pem = B64.readFile(new File(pemPath));
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        int i = 0;
        for (Certificate cert : CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(pem))) {
            store.setCertificateEntry("root-" + i++, cert);
        }
        if (i == 0) {
            throw new GeneralSecurityException("no certificate in " + pemPath);
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(store);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, tmf.getTrustManagers(), null);
        return context.getSocketFactory();
    }
}
