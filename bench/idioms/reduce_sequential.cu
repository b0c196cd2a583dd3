#include <cuda_runtime.h>

__global__ void reduceSum(const float *in, float *out, int n)
{
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {  // @hole
        if (tid < s) {
            sdata[tid] += sdata[tid + s];  // @hole midline=sdata[tid] +=
        }
        __syncthreads();
    }
    if (tid == 0) {
        out[blockIdx.x] = sdata[0];
    }
}
