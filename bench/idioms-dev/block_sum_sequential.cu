#include <cuda_runtime.h>

#define BLOCK 256

__global__ void blockSum(const float *in, float *out, int n)
{
    __shared__ float sdata[BLOCK];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;  // @hole midline=sdata[tid] =
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {  // @hole
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();  // @hole
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
