#include <cuda_runtime.h>

__global__ void countPositive(const float *v, int *count, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && v[i] > 0.0f)
        atomicAdd(count, 1);  // @hole
}

int countPositiveHost(const float *h_v, int n)
{
    float *d_v;
    int *d_count;
    int h_count;
    cudaMalloc(&d_v, n * sizeof(float));
    cudaMalloc(&d_count, sizeof(int));
    cudaMemcpy(d_v, h_v, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(d_count, 0, sizeof(int));  // @hole
    int threads = 256;
    int blocks = (n + threads - 1) / threads;  // @hole midline=int blocks =
    countPositive<<<blocks, threads>>>(d_v, d_count, n);
    cudaMemcpy(&h_count, d_count, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d_v);
    cudaFree(d_count);
    return h_count;
}
