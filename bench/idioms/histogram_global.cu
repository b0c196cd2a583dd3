#include <cuda_runtime.h>

__global__ void histogram(const unsigned char *data, unsigned int *bins, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    while (i < n) {
        atomicAdd(&bins[data[i]], 1);  // @hole midline=atomicAdd(
        i += stride;  // @hole
    }
}
