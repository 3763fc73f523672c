package fedgc.compress;

/**
 * Exact top-k by magnitude in O(n): a quickselect of the k-th largest |x|, then one pass collecting
 * the indices, in increasing order (what fedgc sends: {@code torch.topk(...).indices.sort()}).
 *
 * <p>Ties: entries of equal magnitude at the k-th place are taken lowest index first. PyTorch's
 * {@code topk} leaves that choice unspecified, so with such ties Java and Python may send different
 * (equally large) entries; without ties the selection is the same set. NaN counts as the largest
 * magnitude, as in {@code torch.topk}.
 */
public final class Selection {
    private Selection() {}

    /** Sorted indices of the {@code k} largest {@code |x|} (1 ≤ k ≤ n). */
    public static int[] topK(float[] x, int k) {
        int n = x.length;
        if (k <= 0) {
            return new int[0];
        }
        if (k >= n) {
            return Compressor.range(n);
        }
        // |x| as an int: for non-negative floats the bit patterns sort as the values (NaN above Inf).
        int[] keys = new int[n];
        for (int i = 0; i < n; i++) {
            int bits = Float.floatToRawIntBits(x[i]) & 0x7fffffff;
            keys[i] = bits > 0x7f800000 ? 0x7fc00000 : bits;
        }
        int threshold = kthLargest(keys.clone(), k);
        int above = 0;
        for (int key : keys) {
            if (key > threshold) {
                above++;
            }
        }
        int ties = k - above;
        int[] out = new int[k];
        int j = 0;
        for (int i = 0; i < n; i++) {
            if (keys[i] > threshold) {
                out[j++] = i;
            } else if (keys[i] == threshold && ties > 0) {
                out[j++] = i;
                ties--;
            }
        }
        return out;
    }

    /** The k-th largest value (1-based) of {@code a}, which is reordered. */
    static int kthLargest(int[] a, int k) {
        int target = a.length - k; // index in ascending order
        int lo = 0, hi = a.length - 1;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            int pivot = median(a[lo], a[mid], a[hi]);
            int i = lo, j = hi;
            while (i <= j) {
                while (a[i] < pivot) {
                    i++;
                }
                while (a[j] > pivot) {
                    j--;
                }
                if (i <= j) {
                    int t = a[i];
                    a[i] = a[j];
                    a[j] = t;
                    i++;
                    j--;
                }
            }
            if (target <= j) {
                hi = j;
            } else if (target >= i) {
                lo = i;
            } else {
                return a[target];
            }
        }
        return a[target];
    }

    private static int median(int a, int b, int c) {
        return Math.max(Math.min(a, b), Math.min(Math.max(a, b), c));
    }
}
