#include <cuda_runtime.h>

#define NUM_BINS 256

__global__ void histogramShared(const unsigned char *data, unsigned int *hist, int n)
{
    __shared__ unsigned int localHist[NUM_BINS];
    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) {
        localHist[b] = 0;
    }
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        atomicAdd(&localHist[data[i]], 1);  // @hole
    }
    __syncthreads();
    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) {
        atomicAdd(&hist[b], localHist[b]);  // @hole midline=atomicAdd(&hist[b],
    }
}
