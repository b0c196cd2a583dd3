#include <cuda_runtime.h>
#include <stdio.h>

__global__ void busy(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = sqrtf(x[i]) + 1.0f;
}

float timeKernel(float *d_x, int n)
{
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);  // @hole
    cudaEventRecord(start);
    busy<<<(n + 511) / 512, 512>>>(d_x, n);
    cudaEventRecord(stop);  // @hole midline=cudaEventRecord(
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);  // @hole midline=cudaEventElapsedTime(
    printf("kernel took %.3f ms\n", ms);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms;
}
