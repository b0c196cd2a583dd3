// wrong: the cubic coefficient is 0.44715 instead of 0.044715 (a slipped digit): far off for |x| of order 1.
#include <cuda_runtime.h>
#include <math.h>

__global__ void gelu(float* y, const float* x, int n) {
    int base = blockIdx.x * 4 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 4; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) {
            float v = x[i];
            float u = 0.7978845608f * (v + 0.44715f * v * v * v);
            y[i] = 0.5f * v * (1.0f + tanhf(u));
        }
    }
}
