#include <cuda_runtime.h>

__global__ void sumAtomic(const int *values, int *total, int n)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    int local = 0;
    for (int k = idx; k < n; k += stride)
        local += values[k];  // @hole midline=local +=
    atomicAdd(total, local);  // @hole
}

int sumOnDevice(const int *d_values, int n)
{
    int *d_total;
    int h_total = 0;
    cudaMalloc(&d_total, sizeof(int));
    cudaMemset(d_total, 0, sizeof(int));  // @hole midline=cudaMemset(
    sumAtomic<<<128, 256>>>(d_values, d_total, n);
    cudaMemcpy(&h_total, d_total, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d_total);
    return h_total;
}
