// stale: returns at once and writes nothing, leaving whatever out held (the harness poisons it).
#include <cuda_runtime.h>

__global__ void row_sum(float* out, const float* x, int rows, int cols) {
    if (rows >= 0) return;
    out[blockIdx.x] = x[blockIdx.x] * (float)cols;  // never reached
}
