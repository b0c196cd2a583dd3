#include <cuda_runtime.h>

__global__ void fillValue(float *data, float value, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] = value;  // @hole
    }
}

__global__ void zeroInt(int *buf, int n)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;  // @hole midline=int tid =
    if (tid < n) buf[tid] = 0;
}
