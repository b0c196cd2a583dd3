#include <cuda_runtime.h>

__global__ void blockReduceSum(const float *input, float *output, int n)
{
    __shared__ float warpSums[32];
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % warpSize;  // @hole
    int warpId = threadIdx.x / warpSize;  // @hole
    float val = (tid < n) ? input[tid] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1)
        val += __shfl_down_sync(0xffffffff, val, offset);
    if (lane == 0) warpSums[warpId] = val;
    __syncthreads();
    if (warpId == 0) {
        val = (threadIdx.x < blockDim.x / warpSize) ? warpSums[lane] : 0.0f;  // @hole midline=val =
        for (int offset = 16; offset > 0; offset >>= 1)
            val += __shfl_down_sync(0xffffffff, val, offset);
        if (lane == 0) output[blockIdx.x] = val;
    }
}
