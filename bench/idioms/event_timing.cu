#include <cuda_runtime.h>

__global__ void square(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * x[i];
}

float timeSquare(float *d_x, int n)
{
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);  // @hole
    cudaEventRecord(start);
    square<<<(n + 255) / 256, 256>>>(d_x, n);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);  // @hole midline=cudaEventElapsedTime(
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms;
}
