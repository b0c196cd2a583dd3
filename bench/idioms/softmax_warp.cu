#include <cuda_runtime.h>
#include <cfloat>

__device__ __forceinline__ float warpMax(float v)
{
    for (int mask = 16; mask > 0; mask >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, mask));  // @hole midline=v = fmaxf(v,
    return v;
}

__device__ __forceinline__ float warpSum(float v)
{
    for (int mask = 16; mask > 0; mask >>= 1)
        v += __shfl_xor_sync(0xffffffff, v, mask);
    return v;
}

__global__ void softmaxWarp(const float *in, float *out, int rows, int cols)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float *x = in + row * cols;
    float m = -FLT_MAX;
    for (int i = lane; i < cols; i += 32) m = fmaxf(m, x[i]);
    m = warpMax(m);
    float s = 0.0f;
    for (int i = lane; i < cols; i += 32) s += expf(x[i] - m);  // @hole
    s = warpSum(s);
    for (int i = lane; i < cols; i += 32) out[row * cols + i] = expf(x[i] - m) / s;
}
