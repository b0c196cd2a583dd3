// Segmented inclusive prefix sum: x is cut into segments of 1024 elements (the last one may be shorter) and each
// is scanned on its own: out[i] = x[s] + x[s+1] + ... + x[i], where s = 1024 * (i / 1024).
// The original: one block per segment, and thread 0 of the block runs through the segment alone.
#include <cuda_runtime.h>

#define SEGMENT 1024

/* dice:launch
kernel = "segmented_scan"
sizes = { n = 33554432 }
grid = ["cdiv(n, 1024)"]
block = [256]
args = [
  { name = "out", role = "out", dtype = "float32", shape = ["n"] },
  { name = "x", role = "in", dtype = "float32", shape = ["n"] },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
]
*/
__global__ void segmented_scan(float* out, const float* x, int n) {
    if (threadIdx.x != 0) return;
    int start = blockIdx.x * SEGMENT;
    int end = min(start + SEGMENT, n);
    float s = 0.0f;
    for (int i = start; i < end; ++i) {
        s += x[i];
        out[i] = s;
    }
}
