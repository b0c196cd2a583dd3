#include <cuda_runtime.h>

__global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // @hole
    if (i < n) {
        float v = x[i];  // @hole midline=float v =
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}
