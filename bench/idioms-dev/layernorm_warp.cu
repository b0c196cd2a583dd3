#include <cuda_runtime.h>

__global__ void layernorm(const float *x, const float *gamma, const float *beta, float *y,
                          int rows, int cols, float eps)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float *xr = x + row * cols;
    float sum = 0.0f, sq = 0.0f;
    for (int j = lane; j < cols; j += 32) {
        float v = xr[j];
        sum += v;
        sq += v * v;  // @hole midline=sq +=
    }
    for (int off = 16; off > 0; off >>= 1) {
        sum += __shfl_xor_sync(0xffffffff, sum, off);
        sq += __shfl_xor_sync(0xffffffff, sq, off);  // @hole
    }
    float mean = sum / cols;
    float var = sq / cols - mean * mean;
    float rstd = rsqrtf(var + eps);  // @hole midline=float rstd =
    for (int j = lane; j < cols; j += 32)
        y[row * cols + j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
}
