#include <cuda_runtime.h>

__global__ void sumAtomic(const float *x, float *total, int n)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    for (int i = idx; i < n; i += stride) {
        atomicAdd(total, x[i]);  // @hole
    }
}

__global__ void countMatches(const int *keys, int target, int *count, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && keys[i] == target) {  // @hole midline=if (i < n &&
        atomicAdd(count, 1);
    }
}
