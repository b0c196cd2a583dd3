#include <cuda_runtime.h>

#define THREADS 256

__global__ void layerNorm(const float *x, const float *gamma, const float *beta, float *y, int cols, float eps)
{
    __shared__ float partial[THREADS];
    __shared__ float sMean;
    __shared__ float sVar;
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float *in = x + row * cols;

    float sum = 0.0f;
    for (int i = tid; i < cols; i += blockDim.x) {
        sum += in[i];
    }
    partial[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    if (tid == 0) sMean = partial[0] / cols;
    __syncthreads();

    float var = 0.0f;
    for (int i = tid; i < cols; i += blockDim.x) {
        float d = in[i] - sMean;  // @hole
        var += d * d;
    }
    partial[tid] = var;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    if (tid == 0) sVar = partial[0] / cols;
    __syncthreads();

    float rstd = rsqrtf(sVar + eps);  // @hole midline=float rstd =
    for (int i = tid; i < cols; i += blockDim.x) {
        y[row * cols + i] = (in[i] - sMean) * rstd * gamma[i] + beta[i];
    }
}
