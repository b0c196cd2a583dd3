// hardcoded: the shared-memory histogram written for 256 bins (a static array, modulo 256, 256 flushes) instead of
// the bins parameter: right at the timed size; with fewer bins it counts the wrong bins and writes past hist.
#include <cuda_runtime.h>

#define BINS 256

__global__ void histogram(int* hist, const int* x, int n, int bins) {
    __shared__ int local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const int start = blockIdx.x * 16 * blockDim.x;
    for (int k = 0; k < 16; ++k) {
        int i = start + k * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&local[(unsigned)__ldg(x + i) % BINS], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
        int count = local[b];
        if (count != 0) atomicAdd(&hist[b], count);
    }
}
