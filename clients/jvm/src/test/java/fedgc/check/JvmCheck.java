package fedgc.cli.check;

import fedgc.supernode.Array;
import fedgc.supernode.ArrayRecord;
import fedgc.supernode.Npy;

import fedgc.compress.ClientCompression;
import fedgc.compress.CompressedUpdate;
import fedgc.compress.CompressionContext;
import fedgc.compress.Compressor;
import fedgc.compress.Dgc;
import fedgc.compress.DgcMemory;
import fedgc.compress.Memory;
import fedgc.compress.NoMemory;
import fedgc.compress.ResidualMemory;
import fedgc.compress.Tensor;
import fedgc.compress.TopK;
import fedgc.train.Dataset;
import fedgc.train.MlpTrainer;
import fedgc.train.TrainConfig;
import fedgc.train.TrainResult;
import fedgc.wire.Codec;
import fedgc.wire.CodecException;
import fedgc.wire.Payload;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Java side of tests/test_jvm_compress.py (Python writes the inputs and compares the outputs with
 * fedgc's own results computed in the same test run):
 * <ul>
 *   <li>{@code vectors FILE}: lines {@code name TAB shapes TAB blob-hex TAB decoded-hex}; decode each
 *   blob, require the decoded f32 values bit for bit and the re-encoded blob (in the blob's own
 *   version, 1 or 3) byte for byte.</li>
 *   <li>{@code encode FILE}: lines {@code name TAB shapes TAB blob-hex TAB version TAB values TAB block
 *   TAB inputs}: the payloads of {@code inputs} (per parameter, {@code ;}-separated:
 *   {@code sparse:INDICES:F32HEX}, {@code stc:INDICES:SIGNSHEX:SCALEHEX} or {@code dense:F32HEX},
 *   indices comma-separated) given to {@link Codec#encode(List, int, String, long)} ({@code values}
 *   {@code -} for null) must give the blob byte for byte.</li>
 *   <li>{@code quantize FILE OUT}: lines {@code encoding TAB block TAB F32HEX}; writes per line
 *   {@link fedgc.wire.Quantize#quantize}'s f32 values and the v3 blob of one sparse entry holding
 *   them all ({@code quantized-hex TAB blob-hex}, or {@code error TAB message}).</li>
 *   <li>{@code reject FILE}: lines {@code id TAB shapes TAB blob-hex}; print {@code id TAB reason} (or
 *   {@code ok}) per line: what Java's decoder says of each blob.</li>
 *   <li>{@code compress DIR}: a client's rounds as DIR/case.txt describes them, deltas from
 *   DIR/delta_R.f32; writes DIR/java/blob_R.bin and the final memory as DIR/java/mem_KIND_NAME.f32.
 *   With "restart_after R" the client saves its state after round R (DIR/java/state.npz) and goes on
 *   as a fresh client that loaded it.</li>
 *   <li>{@code half FILE OUT}: f32 values → fp16 bits (u16 little-endian), as numpy's astype.</li>
 *   <li>{@code record BLOB SHAPES OUT}: the blob in Flower's update record ({@link Codec#toRecord});
 *   writes the array's {@code .npy} bytes to OUT and prints what {@link Codec#fromRecord} says of that
 *   record, of one with a second key, and of a float32 array (reason or "ok K payloads").</li>
 *   <li>{@code train DIR}: {@link MlpTrainer} from DIR/model.npz on DIR/data.npz, settings in
 *   DIR/train.txt, sample orders (int32, one permutation per pass) in DIR/orders.i32; writes
 *   DIR/java/trained_NAME.f32 and DIR/java/result.txt ("steps samples mean-loss").</li>
 * </ul>
 * Shapes are written {@code 2x6,3} (a scalar is empty). Exit 1 on any failure.
 */
public final class JvmCheck {
    private JvmCheck() {}

    public static void main(String[] args) throws Exception {
        int failures;
        switch (args[0]) {
            case "vectors": failures = vectors(new File(args[1])); break;
            case "encode": failures = encode(new File(args[1])); break;
            case "quantize": failures = quantize(new File(args[1]), new File(args[2])); break;
            case "reject": failures = reject(new File(args[1])); break;
            case "compress": failures = compress(new File(args[1])); break;
            case "half": failures = half(new File(args[1]), new File(args[2])); break;
            case "train": failures = train(new File(args[1])); break;
            case "record": failures = record(new File(args[1]), args[2], new File(args[3])); break;
            default: throw new IllegalArgumentException("unknown command " + args[0]);
        }
        System.exit(failures == 0 ? 0 : 1);
    }

    static List<long[]> shapes(String text) {
        List<long[]> out = new ArrayList<>();
        for (String part : text.split(",", -1)) {
            if (part.isEmpty()) {
                out.add(new long[0]);
                continue;
            }
            String[] dims = part.split("x");
            long[] shape = new long[dims.length];
            for (int i = 0; i < dims.length; i++) {
                shape[i] = Long.parseLong(dims[i]);
            }
            out.add(shape);
        }
        return out;
    }

    static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x & 0xff));
        }
        return s.toString();
    }

    static byte[] read(File f) throws IOException {
        InputStream in = new FileInputStream(f);
        try {
            byte[] out = new byte[(int) f.length()];
            int off = 0;
            while (off < out.length) {
                int n = in.read(out, off, out.length - off);
                if (n < 0) {
                    throw new IOException("short read " + f);
                }
                off += n;
            }
            return out;
        } finally {
            in.close();
        }
    }

    static void write(File f, byte[] data) throws IOException {
        OutputStream out = new FileOutputStream(f);
        try {
            out.write(data);
        } finally {
            out.close();
        }
    }

    static List<String> lines(File f) throws IOException {
        List<String> out = new ArrayList<>();
        for (String line : new String(read(f), StandardCharsets.UTF_8).split("\n")) {
            if (!line.isEmpty()) {
                out.add(line);
            }
        }
        return out;
    }

    static float[] floats(byte[] raw) {
        float[] out = new float[raw.length / 4];
        ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(out);
        return out;
    }

    static byte[] bytes(float[] values) {
        ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        return b.array();
    }

    static int vectors(File file) throws IOException {
        int failures = 0;
        for (String line : lines(file)) {
            String[] f = line.split("\t", -1);
            String name = f[0];
            try {
                List<long[]> shapes = shapes(f[1]);
                byte[] blob = hex(f[2]);
                List<Payload> payloads = Codec.decode(blob, shapes);
                java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
                for (Payload p : payloads) {
                    byte[] b = bytes(p.toDense());
                    all.write(b, 0, b.length);
                }
                String got = hex(all.toByteArray());
                int version = blob[0] & 0xff; // re-encoded in the blob's own version, values as decoded
                String again = hex(Codec.encode(payloads, version, null, 0));
                if (!got.equals(f[3])) {
                    failures++;
                    System.out.println("FAIL " + name + ": decoded " + got + " expected " + f[3]);
                } else if (!again.equals(f[2])) {
                    failures++;
                    System.out.println("FAIL " + name + ": re-encoded " + again);
                } else {
                    System.out.println("ok " + name);
                }
            } catch (CodecException err) {
                failures++;
                System.out.println("FAIL " + name + ": " + err.getMessage());
            }
        }
        return failures;
    }

    static int[] ints(String text) {
        if (text.isEmpty()) {
            return new int[0];
        }
        String[] parts = text.split(",");
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            out[i] = Integer.parseInt(parts[i]);
        }
        return out;
    }

    static int encode(File file) throws IOException {
        int failures = 0;
        for (String line : lines(file)) {
            String[] f = line.split("\t", -1);
            String name = f[0];
            List<long[]> shapes = shapes(f[1]);
            String[] inputs = f[6].split(";", -1);
            List<Payload> payloads = new ArrayList<>();
            for (int i = 0; i < inputs.length; i++) {
                String[] p = inputs[i].split(":", -1);
                long[] shape = shapes.get(i);
                if (p[0].equals("sparse")) {
                    payloads.add(new Payload.Sparse(Payload.F32, ints(p[1]), floats(hex(p[2])), shape));
                } else if (p[0].equals("stc")) {
                    payloads.add(new Payload.Stc(floats(hex(p[3]))[0], ints(p[1]), hex(p[2]), shape));
                } else {
                    payloads.add(new Payload.Dense(Payload.F32, floats(hex(p[1])), shape));
                }
            }
            String values = f[4].equals("-") ? null : f[4];
            String got = hex(Codec.encode(payloads, Integer.parseInt(f[3]), values, Long.parseUnsignedLong(f[5])));
            if (got.equals(f[2])) {
                System.out.println("ok " + name);
            } else {
                failures++;
                System.out.println("FAIL " + name + ": encoded " + got + " expected " + f[2]);
            }
        }
        return failures;
    }

    static int quantize(File file, File out) throws IOException {
        StringBuilder result = new StringBuilder();
        for (String line : lines(file)) {
            String[] f = line.split("\t", -1);
            float[] values = floats(hex(f[2]));
            long block = Long.parseUnsignedLong(f[1]);
            int[] indices = new int[values.length];
            for (int i = 0; i < indices.length; i++) {
                indices[i] = i;
            }
            try {
                float[] seen = fedgc.wire.Quantize.quantize(values, f[0], block);
                Payload sparse = new Payload.Sparse(Payload.F32, indices, values, new long[] {values.length});
                byte[] blob = Codec.encode(Arrays.asList(sparse), Codec.VERSION_V3, f[0], block);
                result.append(hex(bytes(seen))).append('\t').append(hex(blob)).append('\n');
            } catch (IllegalArgumentException err) {
                result.append("error\t").append(err.getMessage()).append('\n');
            }
        }
        write(out, result.toString().getBytes(StandardCharsets.UTF_8));
        return 0;
    }

    static int reject(File file) throws IOException {
        for (String line : lines(file)) {
            String[] f = line.split("\t", -1);
            String result;
            try {
                Codec.decode(hex(f[2]), shapes(f[1]));
                result = "ok";
            } catch (CodecException err) {
                result = err.reason;
            }
            System.out.println(f[0] + "\t" + result);
        }
        return 0;
    }

    static int record(File blobFile, String shapes, File out) throws IOException {
        byte[] blob = read(blobFile);
        fedgc.supernode.ArrayRecord record = Codec.toRecord(blob);
        write(out, record.get(Codec.UPDATE_KEY).data);
        fedgc.supernode.ArrayRecord twoKeys = Codec.toRecord(blob);
        twoKeys.put("extra", fedgc.supernode.Array.ofFloat32(new float[] {1f}));
        fedgc.supernode.ArrayRecord floats = new fedgc.supernode.ArrayRecord();
        floats.put(Codec.UPDATE_KEY, fedgc.supernode.Array.ofFloat32(new float[] {1f, 2f}));
        for (fedgc.supernode.ArrayRecord r : Arrays.asList(record, twoKeys, floats)) {
            try {
                System.out.println("ok " + Codec.fromRecord(r, shapes(shapes)).size() + " payloads");
            } catch (CodecException err) {
                System.out.println(err.reason);
            }
        }
        return 0;
    }

    static int half(File in, File out) throws IOException {
        float[] values = floats(read(in));
        ByteBuffer b = ByteBuffer.allocate(2 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            b.putShort(fedgc.wire.Half.fromFloat(v));
        }
        write(out, b.array());
        return 0;
    }

    /** case.txt: "key value" lines; "shape NAME DIMS" per parameter; "round R DENSITY CLIENTS APPLIED". */
    static int compress(File dir) throws IOException {
        Map<String, String> conf = new LinkedHashMap<>();
        LinkedHashMap<String, long[]> shapes = new LinkedHashMap<>();
        List<String[]> rounds = new ArrayList<>();
        for (String line : lines(new File(dir, "case.txt"))) {
            String[] f = line.split(" ", -1);
            if (f[0].equals("shape")) {
                shapes.put(f[1], shapes(f.length > 2 ? f[2] : "").get(0));
            } else if (f[0].equals("round")) {
                rounds.add(f);
            } else {
                conf.put(f[0], f.length > 1 ? f[1] : "");
            }
        }
        ClientCompression client = client(conf);
        Memory memory = client.memory;
        long restartAfter = conf.containsKey("restart_after") ? Long.parseLong(conf.get("restart_after")) : -1;
        File out = new File(dir, "java");
        out.mkdirs();
        for (String[] r : rounds) {
            long round = Long.parseLong(r[1]);
            float[] flat = floats(read(new File(dir, "delta_" + round + ".f32")));
            LinkedHashMap<String, Tensor> delta = new LinkedHashMap<>();
            int offset = 0;
            for (Map.Entry<String, long[]> e : shapes.entrySet()) {
                int n = Payload.numelOf(e.getValue());
                delta.put(e.getKey(), new Tensor(e.getValue(), Arrays.copyOfRange(flat, offset, offset + n)));
                offset += n;
            }
            Set<Long> applied = new HashSet<>();
            if (r.length > 4) {
                for (String a : r[4].split(",")) {
                    if (!a.isEmpty()) {
                        applied.add(Long.parseLong(a));
                    }
                }
            }
            CompressionContext ctx = new CompressionContext(round, Double.parseDouble(r[2]), Integer.parseInt(r[3]));
            CompressedUpdate update = client.round(delta, ctx, applied);
            write(new File(out, "blob_" + round + ".bin"), update.encode());
            System.out.println("round " + round + " elements " + update.elementsSent + "/" + update.elementsTotal);
            if (round == restartAfter) { // save the state, forget everything, go on from the saved file
                File state = new File(out, "state.npz");
                OutputStream stream = new FileOutputStream(state);
                try {
                    client.save(stream);
                } finally {
                    stream.close();
                }
                client = client(conf);
                memory = client.memory;
                InputStream in = new FileInputStream(state);
                try {
                    client.load(in);
                } finally {
                    in.close();
                }
            }
        }
        if (memory instanceof DgcMemory) {
            dump(out, "velocity", ((DgcMemory) memory).velocities);
            Map<String, float[]> stored = new LinkedHashMap<>();
            for (String name : ((DgcMemory) memory).momentums.keySet()) {
                stored.put(name, ((DgcMemory) memory).storedMomentum(name));
            }
            dump(out, "momentum", stored);
        } else if (memory instanceof ResidualMemory) {
            dump(out, "residual", ((ResidualMemory) memory).residuals);
        }
        return 0;
    }

    static int train(File dir) throws IOException {
        Map<String, String> conf = new LinkedHashMap<>();
        for (String line : lines(new File(dir, "train.txt"))) {
            String[] f = line.split(" ", 2);
            conf.put(f[0], f[1]);
        }
        Dataset data = Dataset.loadNpz(new File(dir, "data.npz"));
        LinkedHashMap<String, Tensor> model = new LinkedHashMap<>();
        InputStream in = new FileInputStream(new File(dir, "model.npz"));
        try {
            for (Map.Entry<String, Npy.Decoded> e : Dataset.readNpz(in).entrySet()) {
                float[] values = new float[e.getValue().raw.length / 4];
                ByteBuffer.wrap(e.getValue().raw).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(values);
                model.put(e.getKey(), new Tensor(e.getValue().shape, values));
            }
        } finally {
            in.close();
        }
        TrainConfig config = new TrainConfig();
        config.steps = Integer.parseInt(conf.get("steps"));
        config.batchSize = Integer.parseInt(conf.get("batch_size"));
        config.lr = Double.parseDouble(conf.get("lr"));
        config.momentum = Double.parseDouble(conf.get("momentum"));
        config.weightDecay = Double.parseDouble(conf.get("weight_decay"));
        byte[] raw = read(new File(dir, "orders.i32"));
        int passes = raw.length / 4 / data.n;
        config.orders = new int[passes][data.n];
        ByteBuffer orders = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN);
        for (int p = 0; p < passes; p++) {
            orders.asIntBuffer().get(config.orders[p]);
            orders.position(orders.position() + 4 * data.n);
        }
        TrainResult result = new MlpTrainer(data).train(model, config);
        File out = new File(dir, "java");
        out.mkdirs();
        for (Map.Entry<String, Tensor> e : result.model.entrySet()) {
            write(new File(out, "trained_" + e.getKey() + ".f32"), bytes(e.getValue().data));
        }
        write(new File(out, "result.txt"), (result.steps + " " + result.samples + " " + result.meanLoss + " "
            + result.numExamples + "\n").getBytes(StandardCharsets.UTF_8));
        return 0;
    }

    static ClientCompression client(Map<String, String> conf) {
        boolean denseSmall = Boolean.parseBoolean(conf.get("dense_small_tensors"));
        Compressor compressor;
        Memory memory;
        if (conf.get("compressor").equals("dgc")) {
            String clip = conf.get("clip_norm");
            compressor = new Dgc(clip.equals("none") ? null : Double.valueOf(clip));
            memory = new DgcMemory(Double.parseDouble(conf.get("momentum")), Boolean.parseBoolean(conf.get("nesterov")),
                Boolean.parseBoolean(conf.get("momentum_correction")), Boolean.parseBoolean(conf.get("momentum_masking")),
                denseSmall);
            ((DgcMemory) memory).momentumBf16 = "bf16".equals(conf.get("momentum_dtype"));
        } else {
            compressor = new TopK();
            memory = Boolean.parseBoolean(conf.get("error_feedback")) ? new ResidualMemory() : new NoMemory();
        }
        return new ClientCompression(compressor, memory, denseSmall, fedgc.wire.Quantize.code(conf.get("value_dtype")));
    }

    static void dump(File out, String kind, Map<String, float[]> tensors) throws IOException {
        for (Map.Entry<String, float[]> e : tensors.entrySet()) {
            write(new File(out, "mem_" + kind + "_" + e.getKey() + ".f32"), bytes(e.getValue()));
        }
    }
}
