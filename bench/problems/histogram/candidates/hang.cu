// hang: the block waits for a "shared histogram cleared" flag that no thread ever sets, spinning for ever.
#include <cuda_runtime.h>

__global__ void histogram(int* hist, const int* x, int n, int bins) {
    __shared__ volatile int cleared;
    if (threadIdx.x == 0) cleared = 0;
    __syncthreads();
    while (cleared == 0) __nanosleep(1000);
    int base = blockIdx.x * 16 * blockDim.x + threadIdx.x;
    for (int k = 0; k < 16; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) atomicAdd(&hist[(unsigned)x[i] % (unsigned)bins], 1);
    }
}
