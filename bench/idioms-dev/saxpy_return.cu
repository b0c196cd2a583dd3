#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float *x, float *y)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // @hole midline=int idx =
    if (idx >= n) return;  // @hole
    y[idx] = a * x[idx] + y[idx];  // @hole midline=y[idx] =
}

void saxpy_launch(int n, float a, const float *d_x, float *d_y)
{
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    saxpy<<<blocks, threads>>>(n, a, d_x, d_y);
}
