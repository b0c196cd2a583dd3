#include <cuda_runtime.h>

#define THREADS_PER_BLOCK 256

__global__ void dot(const float *a, const float *b, float *result, int n)
{
    __shared__ float cache[THREADS_PER_BLOCK];
    int tid = threadIdx.x + blockIdx.x * blockDim.x;
    int cacheIndex = threadIdx.x;
    float temp = 0.0f;
    while (tid < n) {
        temp += a[tid] * b[tid];  // @hole
        tid += blockDim.x * gridDim.x;  // @hole midline=tid +=
    }
    cache[cacheIndex] = temp;
    __syncthreads();
    int i = blockDim.x / 2;
    while (i != 0) {
        if (cacheIndex < i) cache[cacheIndex] += cache[cacheIndex + i];
        __syncthreads();
        i /= 2;
    }
    if (cacheIndex == 0) atomicAdd(result, cache[0]);
}
