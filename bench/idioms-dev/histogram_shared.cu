#include <cuda_runtime.h>

#define BINS 256

__global__ void histo_private(const unsigned char *buffer, long size, unsigned int *histo)
{
    __shared__ unsigned int histo_s[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        histo_s[b] = 0;  // @hole
    __syncthreads();  // @hole
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    while (i < size) {
        atomicAdd(&histo_s[buffer[i]], 1);
        i += stride;
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        atomicAdd(&histo[b], histo_s[b]);  // @hole midline=atomicAdd(&histo[b],
}
