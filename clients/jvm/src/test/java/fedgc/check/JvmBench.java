package fedgc.cli.check;

import fedgc.compress.CompressedUpdate;
import fedgc.compress.CompressionContext;
import fedgc.compress.Compressor;
import fedgc.compress.Dgc;
import fedgc.compress.DgcMemory;
import fedgc.compress.Memory;
import fedgc.compress.ResidualMemory;
import fedgc.compress.Tensor;
import fedgc.compress.TopK;
import fedgc.compress.UpdateCompressor;
import fedgc.wire.Payload;
import java.io.File;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Timing of the JVM client's compress + encode for bench/jvm_client.py:
 * {@code JvmBench DIR DENSITY REPS}: DIR/shapes.txt ("NAME DIMS" lines), DIR/delta.f32; for DGC and
 * top-k (fresh memory each repetition: one round-1 update) prints "NAME median-ms min-ms blob-bytes npy-bytes" (the
 * blob, and the .npy array Flower carries) and
 * writes DIR/java_NAME.bin (the blob).
 */
public final class JvmBench {
    private JvmBench() {}

    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        double density = Double.parseDouble(args[1]);
        int reps = Integer.parseInt(args[2]);
        LinkedHashMap<String, long[]> shapes = new LinkedHashMap<>();
        for (String line : JvmCheck.lines(new File(dir, "shapes.txt"))) {
            String[] f = line.split(" ", -1);
            shapes.put(f[0], JvmCheck.shapes(f.length > 1 ? f[1] : "").get(0));
        }
        float[] flat = JvmCheck.floats(JvmCheck.read(new File(dir, "delta.f32")));
        LinkedHashMap<String, Tensor> delta = new LinkedHashMap<>();
        int offset = 0;
        for (Map.Entry<String, long[]> e : shapes.entrySet()) {
            int n = Payload.numelOf(e.getValue());
            delta.put(e.getKey(), new Tensor(e.getValue(), Arrays.copyOfRange(flat, offset, offset + n)));
            offset += n;
        }
        for (String name : new String[] {"dgc", "topk"}) {
            double[] ms = new double[reps];
            byte[] blob = null;
            for (int warm = 0; warm < 5; warm++) {
                run(name, delta, density);
            }
            for (int r = 0; r < reps; r++) {
                long t0 = System.nanoTime();
                blob = run(name, delta, density);
                ms[r] = (System.nanoTime() - t0) / 1e6;
            }
            JvmCheck.write(new File(dir, "java_" + name + ".bin"), blob);
            Arrays.sort(ms);
            int arrayBytes = fedgc.wire.Codec.toRecord(blob).get(fedgc.wire.Codec.UPDATE_KEY).data.length;
            System.out.println(name + " " + ms[reps / 2] + " " + ms[0] + " " + blob.length + " " + arrayBytes);
        }
    }

    static byte[] run(String name, LinkedHashMap<String, Tensor> delta, double density) {
        Compressor compressor = name.equals("dgc") ? new Dgc() : new TopK();
        Memory memory = name.equals("dgc") ? new DgcMemory() : new ResidualMemory();
        CompressedUpdate update = UpdateCompressor.compress(delta, compressor, memory,
            new CompressionContext(1, density, 1), true, Payload.F32);
        return update.encode();
    }
}
