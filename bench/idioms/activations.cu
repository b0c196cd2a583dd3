#include <cuda_runtime.h>

__global__ void sigmoidKernel(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 1.0f / (1.0f + expf(-x[i]));  // @hole midline=if (i < n) y[i] =
}

__global__ void leakyRelu(float *x, float slope, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] < 0.0f) {
        x[i] *= slope;
    }
}

__global__ void tanhKernel(const float *in, float *out, int n)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        out[idx] = tanhf(in[idx]);
    }
}
