// Histogram, accumulated into hist: for every x[i] (any int32), hist[(unsigned)x[i] % bins] += 1. hist comes in
// holding counts (random here) and the kernel adds to them, so no separate zeroing launch is needed.
// The original: every element is one atomicAdd on global memory (256 bins: heavy contention). A block covers
// 16 * 256 = 4096 elements, each thread 16 of them, coalesced.
#include <cuda_runtime.h>

/* dice:launch
kernel = "histogram"
sizes = { n = 16777216, bins = 256 }
grid = ["cdiv(n, 4096)"]
block = [256]
shared_bytes = "bins * 4"
args = [
  { name = "hist", role = "inout", dtype = "int32", shape = ["bins"] },
  { name = "x", role = "in", dtype = "int32", shape = ["n"] },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
  { name = "bins", role = "scalar", dtype = "int32", value = "bins" },
]
*/
__global__ void histogram(int* hist, const int* x, int n, int bins) {
    int base = blockIdx.x * 16 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 16; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) atomicAdd(&hist[(unsigned)x[i] % (unsigned)bins], 1);
    }
}
