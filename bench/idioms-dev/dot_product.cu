#include <cuda_runtime.h>

const int threadsPerBlock = 256;

__global__ void dot(const float *a, const float *b, float *c, int N)
{
    __shared__ float cache[threadsPerBlock];
    int tid = threadIdx.x + blockIdx.x * blockDim.x;
    int cacheIndex = threadIdx.x;
    float temp = 0;
    while (tid < N) {
        temp += a[tid] * b[tid];  // @hole midline=temp +=
        tid += blockDim.x * gridDim.x;
    }
    cache[cacheIndex] = temp;  // @hole
    __syncthreads();
    int i = blockDim.x / 2;
    while (i != 0) {
        if (cacheIndex < i)
            cache[cacheIndex] += cache[cacheIndex + i];  // @hole midline=cache[cacheIndex] +=
        __syncthreads();
        i /= 2;
    }
    if (cacheIndex == 0)
        c[blockIdx.x] = cache[0];
}
