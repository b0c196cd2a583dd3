// Half-precision vector add: c[i] = a[i] + b[i] (float16, rounded to nearest).
// The original: one 2-byte element at a time, 8 per thread (a block covers 2048 elements, coalesced).
#include <cuda_runtime.h>
#include <cuda_fp16.h>

/* dice:launch
kernel = "vector_add_fp16"
sizes = { n = 67108864 }
grid = ["cdiv(n, 2048)"]
block = [256]
args = [
  { name = "c", role = "out", dtype = "float16", shape = ["n"] },
  { name = "a", role = "in", dtype = "float16", shape = ["n"] },
  { name = "b", role = "in", dtype = "float16", shape = ["n"] },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
]
*/
__global__ void vector_add_fp16(__half* c, const __half* a, const __half* b, int n) {
    int base = blockIdx.x * 8 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 8; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) c[i] = __hadd(a[i], b[i]);
    }
}
