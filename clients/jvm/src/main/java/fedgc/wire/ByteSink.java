package fedgc.wire;

import java.util.Arrays;

/** A growable little-endian byte buffer (what the encoder writes into). */
final class ByteSink {
    private byte[] buf;
    private int size;

    ByteSink(int capacity) {
        buf = new byte[Math.max(16, capacity)];
    }

    private void ensure(int more) {
        if (size + more > buf.length) {
            buf = Arrays.copyOf(buf, Math.max(buf.length * 2, size + more));
        }
    }

    void u8(int b) {
        ensure(1);
        buf[size++] = (byte) b;
    }

    void bytes(byte[] data) {
        ensure(data.length);
        System.arraycopy(data, 0, buf, size, data.length);
        size += data.length;
    }

    void f32(float f) {
        int v = Float.floatToRawIntBits(f);
        ensure(4);
        buf[size++] = (byte) v;
        buf[size++] = (byte) (v >>> 8);
        buf[size++] = (byte) (v >>> 16);
        buf[size++] = (byte) (v >>> 24);
    }

    void f16(float f) {
        short v = Half.fromFloat(f);
        ensure(2);
        buf[size++] = (byte) v;
        buf[size++] = (byte) (v >>> 8);
    }

    /** Unsigned LEB128, shortest form ({@code v} read as unsigned 64-bit). */
    void varint(long v) {
        ensure(10);
        while ((v & ~0x7fL) != 0) {
            buf[size++] = (byte) ((v & 0x7f) | 0x80);
            v >>>= 7;
        }
        buf[size++] = (byte) v;
    }

    int size() {
        return size;
    }

    byte[] toByteArray() {
        return Arrays.copyOf(buf, size);
    }
}
