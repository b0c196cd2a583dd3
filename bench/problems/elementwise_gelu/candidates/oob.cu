// oob: the `i < n` bounds check is gone; when n is not a multiple of 1024 the last block reads and writes up to
// 1023 elements past the end of x and y.
#include <cuda_runtime.h>
#include <math.h>

__global__ void gelu(float* y, const float* x, int n) {
    int base = blockIdx.x * 4 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 4; ++k) {
        int i = base + k * blockDim.x;
        float v = x[i];
        float u = 0.7978845608f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(u));
    }
}
