#include <cuda_runtime.h>

__inline__ __device__ float warpReduceSum(float val)
{
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
        val += __shfl_down_sync(0xffffffff, val, offset);  // @hole
    }
    return val;
}

__global__ void warpSumKernel(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (i < n) ? in[i] : 0.0f;
    v = warpReduceSum(v);
    if ((threadIdx.x & (warpSize - 1)) == 0) {
        atomicAdd(out, v);  // @hole midline=atomicAdd(
    }
}
