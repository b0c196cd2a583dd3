#include <cuda_runtime.h>

__global__ void scale(float *data, float factor, int size)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // @hole
    if (idx < size) {
        data[idx] *= factor;  // @hole midline=data[idx]
    }
}
