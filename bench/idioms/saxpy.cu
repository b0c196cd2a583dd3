#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];  // @hole
}

void runSaxpy(int n, float a, const float *d_x, float *d_y)
{
    saxpy<<<(n + 255) / 256, 256>>>(n, a, d_x, d_y);  // @hole midline=saxpy<<<
    cudaDeviceSynchronize();
}
