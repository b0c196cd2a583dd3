#include <cuda_runtime.h>

__global__ void sumSquares(const float *x, float *result, int n)
{
    float local = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        local += x[i] * x[i];  // @hole midline=local +=
    }
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
        local += __shfl_down_sync(0xffffffff, local, offset);
    }
    if (threadIdx.x % warpSize == 0) {  // @hole
        atomicAdd(result, local);
    }
}
