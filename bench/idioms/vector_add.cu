#include <cuda_runtime.h>

__global__ void vectorAdd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // @hole
    if (i < n) {
        c[i] = a[i] + b[i];  // @hole midline=c[i] =
    }
}

void launchVectorAdd(const float *a, const float *b, float *c, int n)
{
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    vectorAdd<<<blocks, threads>>>(a, b, c, n);
}
