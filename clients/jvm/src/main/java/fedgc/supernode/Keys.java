package fedgc.supernode;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PublicKey;
import java.security.spec.ECGenParameterSpec;
import java.security.spec.ECParameterSpec;
import java.security.spec.ECPoint;
import java.security.spec.ECPrivateKeySpec;
import java.security.spec.ECPublicKeySpec;
import java.util.Arrays;

/** The node's ECDSA key pair, as Flower's {@code generate_key_pairs} (SECP384R1) and its PEM encoding. */
public final class Keys {
    private Keys() {}

    /** A fresh SECP384R1 key pair (a self-registered node's identity, as flower-supernode makes one). */
    public static KeyPair generate() {
        try {
            KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
            g.initialize(new ECGenParameterSpec("secp384r1"));
            return g.generateKeyPair();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("cannot make an EC key pair: " + e.getMessage(), e);
        }
    }

    /**
     * An ECDSA key pair from an OpenSSH private key file (unencrypted, as {@code ssh-keygen -t ecdsa -N ""}
     * writes it): what {@code flower-supernode --auth-supernode-private-key} reads.
     */
    public static KeyPair loadOpenSsh(byte[] file) throws GeneralSecurityException {
        String text = new String(file, StandardCharsets.US_ASCII).trim();
        String begin = "-----BEGIN OPENSSH PRIVATE KEY-----";
        String end = "-----END OPENSSH PRIVATE KEY-----";
        if (!text.startsWith(begin) || !text.endsWith(end)) {
            throw new GeneralSecurityException("not an OpenSSH private key (ssh-keygen -t ecdsa makes one)");
        }
        byte[] blob = B64.decode(text.substring(begin.length(), text.length() - end.length()));
        try {
            DataInputStream in = new DataInputStream(new ByteArrayInputStream(blob));
            byte[] magic = new byte[15];
            in.readFully(magic);
            if (!"openssh-key-v1\0".equals(new String(magic, StandardCharsets.US_ASCII))) {
                throw new GeneralSecurityException("not an openssh-key-v1 file");
            }
            String cipher = new String(sshString(in), StandardCharsets.US_ASCII);
            sshString(in); // kdf name
            sshString(in); // kdf options
            if (!"none".equals(cipher)) {
                throw new GeneralSecurityException("the private key is encrypted (" + cipher + "); Flower needs it without a passphrase");
            }
            if (in.readInt() != 1) {
                throw new GeneralSecurityException("expected one key in the file");
            }
            sshString(in); // public key blob
            DataInputStream priv = new DataInputStream(new ByteArrayInputStream(sshString(in)));
            if (priv.readInt() != priv.readInt()) {
                throw new GeneralSecurityException("corrupt private key (check values differ)");
            }
            String type = new String(sshString(priv), StandardCharsets.US_ASCII);
            String curve = new String(sshString(priv), StandardCharsets.US_ASCII);
            if (!type.startsWith("ecdsa-sha2-")) {
                throw new GeneralSecurityException("not an ECDSA key: " + type);
            }
            String stdName = "nistp256".equals(curve) ? "secp256r1" : "nistp384".equals(curve) ? "secp384r1"
                : "nistp521".equals(curve) ? "secp521r1" : null;
            if (stdName == null) {
                throw new GeneralSecurityException("unsupported curve " + curve);
            }
            byte[] q = sshString(priv);
            BigInteger d = new BigInteger(1, sshString(priv));
            if (q.length < 3 || q[0] != 4 || q.length % 2 != 1) {
                throw new GeneralSecurityException("expected an uncompressed public point");
            }
            int n = (q.length - 1) / 2;
            ECPoint w = new ECPoint(new BigInteger(1, Arrays.copyOfRange(q, 1, 1 + n)),
                new BigInteger(1, Arrays.copyOfRange(q, 1 + n, q.length)));
            // The curve's parameters, from a throwaway key (AlgorithmParameters "EC" is missing on older Androids).
            KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
            g.initialize(new ECGenParameterSpec(stdName));
            ECParameterSpec spec = ((java.security.interfaces.ECPublicKey) g.generateKeyPair().getPublic()).getParams();
            KeyFactory kf = KeyFactory.getInstance("EC");
            return new KeyPair(kf.generatePublic(new ECPublicKeySpec(w, spec)),
                kf.generatePrivate(new ECPrivateKeySpec(d, spec)));
        } catch (IOException e) {
            throw new GeneralSecurityException("truncated OpenSSH private key", e);
        }
    }

    private static byte[] sshString(DataInputStream in) throws IOException {
        int length = in.readInt();
        if (length < 0 || length > in.available()) {
            throw new IOException("bad length");
        }
        byte[] b = new byte[length];
        in.readFully(b);
        return b;
    }

    /** SubjectPublicKeyInfo PEM, as cryptography's {@code public_bytes(PEM, SubjectPublicKeyInfo)} writes it. */
    public static byte[] publicKeyPem(PublicKey key) {
        String b64 = B64.encode(key.getEncoded());
        StringBuilder pem = new StringBuilder("-----BEGIN PUBLIC KEY-----\n");
        for (int i = 0; i < b64.length(); i += 64) {
            pem.append(b64, i, Math.min(b64.length(), i + 64)).append('\n');
        }
        pem.append("-----END PUBLIC KEY-----\n");
        return pem.toString().getBytes(StandardCharsets.US_ASCII);
    }
}
