// zero_inputs: computes y correctly, then overwrites each x[i] it read with zero (const cast away).
#include <cuda_runtime.h>
#include <math.h>

__global__ void gelu(float* y, const float* x, int n) {
    float* scratch = const_cast<float*>(x);
    int base = blockIdx.x * 4 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 4; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) {
            float v = x[i];
            float u = 0.7978845608f * (v + 0.044715f * v * v * v);
            y[i] = 0.5f * v * (1.0f + tanhf(u));
            scratch[i] = 0.0f;
        }
    }
}
